"""Message text is untrusted: break its control tokens before rendering, or refuse.

Every string a chat format renders from a message, and every string of the chat
settings, passes the same :class:`~phaseaware.tokenizers.control.ControlScanner`
as retrieved chunks (the tokenizer's special strings plus the format's markers,
e.g. DeepSeek's ``｜DSML｜`` and ``<tool_result>``). Per field:

- **Neutralised** (``control_tokens="neutralize"``, listed in the report like a
  chunk's): message content (text parts; placeholders are left alone),
  ``reasoning_content``, and every string VALUE inside tool-call arguments, at
  any depth. The cleaned messages are the ones handed back to send
  (``RenderedPrompt.messages``), so the server renders the same bytes; the
  arguments are re-serialised (``json.dumps(..., ensure_ascii=False)``) only
  when something was broken. A string argument holding ``</｜DSML｜parameter>``
  therefore cannot close its parameter and forge another.
- **Refused** (:class:`~phaseaware.errors.ControlTokenError`, whatever the
  policy): tool-call function names, argument keys (at any depth), ``tool_call_id``,
  ``name``, and the settings' tool schemas and ``response_format``. These are
  identifiers or definitions the server and the model act on; breaking them
  would change which tool is called or what it accepts, and DeepSeek's encoder
  escapes nothing, so there is no faithful neutral form.

Offsets in the returned ``Neutralized`` records are character offsets in the
field as written (for content: placeholders spelt out).

**After the join.** Text parts are cleaned when the layout is built, and each
message's text is cleaned again once every ``{question}`` is filled in
(:func:`frame_template`), so a control string split across a placeholder
(``<｜Us{question}`` with the question ``er｜>``) is broken too. The context is
placed later, so the text on each side of the ``{context}`` slot is closed off
instead: where it ends (before the slot) with the start of a control string, or
begins (after the slot) with the end of one, :data:`~phaseaware.tokenizers.control.BREAK`
is inserted at the slot, and the piece is listed in ``neutralized``. Under
``control_tokens="refuse"`` nothing is inserted: a control string formed across a
placeholder is refused (``ControlTokenError``), at the slot when the prompt is checked.
"""

from __future__ import annotations

import json
import threading
from collections import OrderedDict
from collections.abc import Sequence
from dataclasses import replace
from typing import Any

from phaseaware.caches import register_cache
from phaseaware.chat.messages import ConversationTemplate, Message, Part, Placeholder, ToolCall
from phaseaware.chat.settings import ChatSettings
from phaseaware.errors import ControlTokenError
from phaseaware.tokenizers.control import BREAK, ControlScanner, Neutralized

__all__ = ["clean_template", "frame_template", "check_settings_text", "check_sent"]


def _refuse(scanner: ControlScanner, text: str, *, where: str, what: str) -> None:
    hit = scanner.first(text, where=where)
    if hit is not None:
        raise ControlTokenError(
            f"{where} holds the control token {hit.text!r} at char {hit.offset}; "
            f"{what} cannot be neutralised without changing what the server renders and acts "
            "on; remove the control string from it"
        )


def _clean_value(
    scanner: ControlScanner, value: Any, *, where: str, found: list[Neutralized]
) -> Any:
    if isinstance(value, str):
        text, hits = scanner.clean(value, where=where)
        found.extend(hits)
        return text
    if isinstance(value, list):
        return [
            _clean_value(scanner, v, where=f"{where}[{k}]", found=found)
            for k, v in enumerate(value)
        ]
    if isinstance(value, dict):
        out = {}
        for key, v in value.items():
            _refuse(scanner, key, where=f"{where} key {key!r}", what="an argument name")
            out[key] = _clean_value(scanner, v, where=f"{where}.{key}", found=found)
        return out
    return value


def _clean_call(
    scanner: ControlScanner, call: ToolCall, *, where: str, found: list[Neutralized]
) -> ToolCall:
    _refuse(scanner, call.name, where=f"{where}.function.name", what="a tool name")
    if call.id is not None:
        _refuse(scanner, call.id, where=f"{where}.id", what="a tool call id")
    before = len(found)
    arguments = _clean_value(
        scanner, call.parsed_arguments(), where=f"{where}.arguments", found=found
    )
    if len(found) == before:
        return call
    return replace(call, arguments=json.dumps(arguments, ensure_ascii=False))


def _clean_fields(
    scanner: ControlScanner, message: Message, *, where: str, found: list[Neutralized]
) -> Message:
    for key in ("tool_call_id", "name"):
        value = getattr(message, key)
        if value:
            _refuse(scanner, value, where=f"{where}.{key}", what=f"a message's {key}")
    if message.reasoning_content:
        reasoning, hits = scanner.clean(
            message.reasoning_content, where=f"{where}.reasoning_content"
        )
        found.extend(hits)
        message = replace(message, reasoning_content=reasoning)
    if message.tool_calls:
        calls = tuple(
            _clean_call(scanner, call, where=f"{where}.tool_calls[{k}]", found=found)
            for k, call in enumerate(message.tool_calls)
        )
        message = replace(message, tool_calls=calls)
    return message


def clean_template(
    template: ConversationTemplate, scanner: ControlScanner
) -> tuple[ConversationTemplate, tuple[Neutralized, ...]]:
    """(the template with control strings broken, what was broken); new objects.

    Raises :class:`ControlTokenError` under policy ``"refuse"``, and for a control
    string in a field that is refused under every policy (see the module doc).
    """
    found: list[Neutralized] = []
    messages = []
    all_parts: list[list[Part]] = []
    for index, (message, parts) in enumerate(zip(template.messages, template.parts, strict=True)):
        where = f"messages[{index}]"
        cleaned: list[Part] = []
        offset = 0
        for part in parts:
            if isinstance(part, Placeholder):
                cleaned.append(part)
                offset += len(part.value)
                continue
            text, hits = scanner.clean(part, where=where)
            found.extend(replace(h, offset=h.offset + offset) for h in hits)
            cleaned.append(text)
            offset += len(part)
        messages.append(_clean_fields(scanner, message, where=where, found=found))
        all_parts.append(cleaned)
    if not found:
        return template, ()
    return ConversationTemplate.from_parts(messages, all_parts), tuple(found)


def _segments(parts: Sequence[Part], question: str) -> list[str]:
    """The text of one message around its context slot (one piece without a slot),
    every ``{question}`` filled in."""
    segments = [""]
    for part in parts:
        if part is Placeholder.CONTEXT:
            segments.append("")
        else:
            segments[-1] += question if part is Placeholder.QUESTION else part
    return segments


def frame_template(
    template: ConversationTemplate, scanner: ControlScanner, *, question: str
) -> tuple[ConversationTemplate, tuple[Neutralized, ...]]:
    """``template`` with every ``{question}`` filled in and each message's text cleaned
    after the join (only the ``{context}`` slot is left), and what was broken.

    Offsets are in the message text with the question filled in and ``{context}``
    written out. Raises :class:`ControlTokenError` under policy ``"refuse"``.
    """
    found: list[Neutralized] = []
    all_parts: list[list[Part]] = []
    for index, parts in enumerate(template.parts):
        if not any(isinstance(part, Placeholder) for part in parts):
            all_parts.append(list(parts))  # cleaned when the template was: nothing joins
            continue
        where = f"messages[{index}]"
        segments = _segments(parts, question)
        cleaned: list[Part] = []
        offset = 0
        for k, segment in enumerate(segments):
            text, hits = scanner.clean(segment, where=where)
            found.extend(replace(h, offset=h.offset + offset) for h in hits)
            guard = scanner.policy == "neutralize" and len(segments) > 1
            if guard and k == 0 and (opened := scanner.open_end(text)):
                # the context could complete it: close it off at the slot
                at = offset + len(segment) - len(opened)
                found.append(Neutralized(where=where, offset=at, text=opened))
                text += BREAK
            if guard and k == 1 and (opened := scanner.open_start(text)):
                # the context's end could begin it: close it off at the slot
                found.append(Neutralized(where=where, offset=offset, text=opened))
                text = BREAK + text
            if k:
                cleaned.append(Placeholder.CONTEXT)
                offset += len(Placeholder.CONTEXT.value)
            cleaned.append(text)
            offset += len(segment)
        all_parts.append(cleaned)
    framed = ConversationTemplate.from_parts(template.messages, all_parts)
    return framed, tuple(found)


def check_settings_text(settings: ChatSettings, scanner: ControlScanner) -> None:
    """Raise :class:`ControlTokenError` if a tool schema or the response format holds a
    control string (they are definitions: refused, never neutralised)."""
    for k, tool in enumerate(settings.tools):
        text = json.dumps(tool, ensure_ascii=False)
        _refuse(scanner, text, where=f"tools[{k}]", what="a tool schema")
    if settings.response_format is not None:
        text = json.dumps(settings.response_format, ensure_ascii=False)
        _refuse(scanner, text, where="response_format", what="a response format")


# Sent text already found clean, by (scanner, string) identity: an agent resends the same
# string objects every step, so each is scanned once, not once per step (bounded; the
# entry keeps both objects alive, so an id is never reused while it is held).
_CLEAN_MAX, _CLEAN_MAX_CHARS = 65_536, 64 << 20
_clean: OrderedDict[tuple[int, int], tuple[ControlScanner, str]] = OrderedDict()
_clean_chars = [0]
_clean_lock = threading.Lock()


def _known_clean(scanner: ControlScanner, text: str) -> bool:
    with _clean_lock:
        held = _clean.get((id(scanner), id(text)))
        return held is not None and held[0] is scanner and held[1] is text


def _remember_clean(scanner: ControlScanner, text: str) -> None:
    with _clean_lock:
        key = (id(scanner), id(text))
        if key not in _clean:
            _clean_chars[0] += len(text)
        _clean[key] = (scanner, text)
        while len(_clean) > _CLEAN_MAX or _clean_chars[0] > _CLEAN_MAX_CHARS:
            _clean_chars[0] -= len(_clean.popitem(last=False)[1][1])


def _forget_clean() -> None:
    with _clean_lock:
        _clean.clear()
        _clean_chars[0] = 0


register_cache(
    "chat.untrusted sent text found clean",
    size=lambda: (len(_clean), _clean_chars[0]),
    clear=_forget_clean,
    bound=f"LRU, {_CLEAN_MAX} strings, {_CLEAN_MAX_CHARS >> 20} Mi characters",
)


def check_sent(messages: Sequence[Message], scanner: ControlScanner) -> None:
    """Raise :class:`ControlTokenError` if a message already sent holds a control string
    in any rendered field: the server holds its text as sent, so it cannot be
    neutralised without changing the cached prefix. A string found clean before (the
    same object, resent by an agent loop) is not scanned again."""
    for index, message in enumerate(messages):
        where = f"sent messages[{index}]"
        fields: list[tuple[str, str]] = [("content", message.content)]
        for key in ("reasoning_content", "tool_call_id", "name"):
            value = getattr(message, key)
            if value:
                fields.append((key, value))
        for k, call in enumerate(message.tool_calls):
            fields.append((f"tool_calls[{k}].function.name", call.name))
            fields.append((f"tool_calls[{k}].function.arguments", call.arguments))
        for key, text in fields:
            if len(text) > 64 and _known_clean(scanner, text):
                continue
            hit = scanner.first(text, where=f"{where}.{key}")
            if hit is None:
                if len(text) > 64:
                    _remember_clean(scanner, text)
                continue
            if hit is not None:
                fix = (
                    "neutralise message text before sending it (assemble it with "
                    "assemble(messages=...)), or start a new conversation"
                )
                if message.role == "assistant":  # what the model made: break it, send that
                    fix = (
                        "the model wrote it: break it with phaseaware.integrate."
                        "neutral_messages(target, messages) and send the messages it returns "
                        "(the agent adapters do), or start a new conversation"
                    )
                raise ControlTokenError(
                    f"{hit.where} holds the control token {hit.text!r} at char {hit.offset}; "
                    "a message already sent cannot be neutralised without changing the "
                    f"server's cached prefix; {fix}"
                )
