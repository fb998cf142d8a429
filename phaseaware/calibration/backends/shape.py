"""An OpenAI-compatible response's answer text, read only after its shape is checked.

The ``openai`` client builds its response objects without validation: for a body of
``{"choices": "nope"}``, ``response.choices[0]`` is ``"n"`` and the answer read from it
was ``""``, logged and graded like any other (36 answers of one compare run). Here every
field on the way to the text is checked: ``choices`` a non-empty list of objects, a chat
choice's ``message`` an object whose ``content`` is a string, ``null`` (no text: a reply
that is all reasoning or tool calls) or the documented content parts (``[{"type":
"text", "text": "..."}]``); a completions choice's ``text`` a string or ``null``.
Anything else is a :class:`MalformedResponse` for that request: never an answer.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

__all__ = ["MalformedResponse", "response_text"]

_SCALARS = (str, bytes, int, float, bool, list, tuple)


class MalformedResponse(ValueError):
    """The response does not have the documented shape; the message says which field."""


def _field(obj: Any, name: str) -> Any:
    if isinstance(obj, Mapping):
        return obj.get(name)
    extra = getattr(obj, "model_extra", None)  # openai's models keep unknown fields here
    value = getattr(obj, name, None)
    if value is None and isinstance(extra, Mapping):
        value = extra.get(name)
    return value


def _is_object(value: Any) -> bool:
    return value is not None and not isinstance(value, _SCALARS)


def _kind(value: Any) -> str:
    return "null" if value is None else type(value).__name__


def _parts_text(parts: Sequence[Any]) -> str:
    texts = []
    for i, part in enumerate(parts):
        if not _is_object(part):
            raise MalformedResponse(f"message.content[{i}] is {_kind(part)}, not a content part")
        kind, text = _field(part, "type"), _field(part, "text")
        if kind != "text" or not isinstance(text, str):
            raise MalformedResponse(
                f"message.content[{i}] is not a text part ({{'type': 'text', 'text': str}})"
            )
        texts.append(text)
    return "".join(texts)


def response_text(response: Any, *, endpoint: str) -> str:
    """The first choice's text of a chat (``endpoint="chat"``) or completions response.

    Raises :class:`MalformedResponse` naming the first field that is not as documented.
    """
    if not _is_object(response):
        raise MalformedResponse(f"the response is {_kind(response)}, not a JSON object")
    choices = _field(response, "choices")
    if not isinstance(choices, list | tuple):
        raise MalformedResponse(f"choices is {_kind(choices)}, not a list")
    if not choices:
        raise MalformedResponse("choices is empty")
    choice = choices[0]
    if not _is_object(choice):
        raise MalformedResponse(f"choices[0] is {_kind(choice)}, not an object")
    if endpoint == "chat":
        message = _field(choice, "message")
        if not _is_object(message):
            raise MalformedResponse(f"choices[0].message is {_kind(message)}, not an object")
        content = _field(message, "content")
        if content is None or isinstance(content, str):
            return content or ""
        if isinstance(content, list | tuple):
            return _parts_text(content)
        raise MalformedResponse(
            f"choices[0].message.content is {_kind(content)}, not a string or content parts"
        )
    text = _field(choice, "text")
    if text is None or isinstance(text, str):
        return text or ""
    raise MalformedResponse(f"choices[0].text is {_kind(text)}, not a string")
