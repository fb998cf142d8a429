"""The one declared schema of ``phaseaware assemble``'s request JSON (msgspec structs).

Strict on purpose, because a lenient reader changes behaviour silently:
``"thinking": "false"`` turned thinking on, a misspelled ``"scroe"`` dropped a
chunk's score, ``"options": 0`` meant "no options". Here:

* unknown keys are errors, with a "did you mean" for near misses (difflib);
* booleans must be JSON booleans, numbers JSON numbers, strings strings (no coercion);
* ``options`` is an object or ``null``, nothing else;
* integers are range-checked (``phaseaware.limits``) before any arithmetic.

Chunk fields, messages and endpoint records are then read by the core's own
validators (``Chunk.from_dict``, ``parse_conversation``, ``resolve_endpoint``),
which a Python caller meets too; the schema fixes their keys and JSON types.
"""

from __future__ import annotations

import difflib
import re
from typing import Annotated, Any

import msgspec

from phaseaware.errors import InputError
from phaseaware.limits import (
    MAX_BUDGET_TOKENS,
    MAX_CHUNKS,
    MAX_KEYS_PER_CHUNK,
    MAX_PAD_COST,
    MAX_PERIOD,
    MAX_POSITION_OFFSET,
    MAX_REPEAT_CHARS,
)

__all__ = [
    "REQUEST_KEYS",
    "REQUEST_OPTION_KEYS",
    "Request",
    "RequestChunk",
    "RequestOptions",
    "validate_request",
]

#: Keys a request document once had, by the key that replaced them (named in the error).
RENAMED_KEYS: dict[str, str] = {"template": "chat_format"}

Offset = Annotated[int, msgspec.Meta(ge=0, le=MAX_POSITION_OFFSET)]
UNSET: Any = msgspec.UNSET


class RequestOptions(msgspec.Struct, forbid_unknown_fields=True, kw_only=True):
    """``options``: the ``AssemblyOptions`` a request may set, plus the chat settings
    (``thinking``, ``reasoning_effort``; ``server_default``: plan with the endpoint
    record's ``server_default``, for requests that will state no chat settings)."""

    position_offset: Offset | msgspec.UnsetType = UNSET
    strategy: str | msgspec.UnsetType = UNSET
    pad: bool | msgspec.UnsetType = UNSET
    repeat: bool | msgspec.UnsetType = UNSET
    length_pad: bool | msgspec.UnsetType = UNSET
    pad_cost: Annotated[float, msgspec.Meta(ge=0, le=MAX_PAD_COST)] | msgspec.UnsetType = UNSET
    allow_tokenizer_mismatch: bool | msgspec.UnsetType = UNSET
    period: Annotated[int, msgspec.Meta(ge=1, le=MAX_PERIOD)] | None | msgspec.UnsetType = UNSET
    max_keys_per_chunk: (
        Annotated[int, msgspec.Meta(ge=1, le=MAX_KEYS_PER_CHUNK)] | msgspec.UnsetType
    ) = UNSET
    repeat_max_chars: (
        Annotated[int, msgspec.Meta(ge=1, le=MAX_REPEAT_CHARS)] | msgspec.UnsetType
    ) = UNSET
    control_tokens: str | msgspec.UnsetType = UNSET
    offsets: (
        Annotated[list[Offset], msgspec.Meta(min_length=1, max_length=4096)]
        | None
        | msgspec.UnsetType
    ) = UNSET
    robust_tolerance: Annotated[float, msgspec.Meta(ge=0, le=1)] | msgspec.UnsetType = UNSET
    duplicate_ids: str | msgspec.UnsetType = UNSET
    thinking: bool | msgspec.UnsetType = UNSET
    reasoning_effort: str | int | msgspec.UnsetType = UNSET
    server_default: bool | msgspec.UnsetType = UNSET


class RequestChunk(msgspec.Struct, forbid_unknown_fields=True, kw_only=True):
    """One ``chunks`` item; values are checked again by ``Chunk.from_dict``."""

    text: str
    # int too: a huge JSON integer is reported by Chunk.from_dict ("too large")
    score: float | int = 0.0
    id: str | None = None
    evidence: list[str] | None = None


class Request(msgspec.Struct, forbid_unknown_fields=True, kw_only=True):
    """The request document."""

    tokenizer: str
    question: str
    chunks: Annotated[list[RequestChunk], msgspec.Meta(max_length=MAX_CHUNKS)]
    budget_tokens: Annotated[int, msgspec.Meta(ge=1, le=MAX_BUDGET_TOKENS)]
    chat_format: str | None = None
    profile: str | None = None
    system: str | None = None
    options: RequestOptions | None = None
    # Message and endpoint fields are the chat and endpoint modules' to check.
    messages: list[dict[str, Any]] | None = None
    endpoint: str | dict[str, Any] | None = None

    def option_values(self) -> dict[str, Any]:
        """The options the request sets (``thinking`` included), by name."""
        if self.options is None:
            return {}
        return {
            name: getattr(self.options, name)
            for name in self.options.__struct_fields__
            if getattr(self.options, name) is not msgspec.UNSET
        }


REQUEST_KEYS: tuple[str, ...] = Request.__struct_fields__
#: The chat-settings keys of ``options`` (not ``AssemblyOptions`` fields).
SETTINGS_OPTION_KEYS = ("thinking", "reasoning_effort", "server_default")
REQUEST_OPTION_KEYS: tuple[str, ...] = tuple(
    name for name in RequestOptions.__struct_fields__ if name not in SETTINGS_OPTION_KEYS
)

# The struct at each path of the document (list indices written as "[]").
_STRUCT_AT: dict[str, type[msgspec.Struct]] = {
    "": Request,
    "options": RequestOptions,
    "chunks[]": RequestChunk,
}

_AT = re.compile(r" - at `\$(?P<path>[^`]*)`$")
_UNKNOWN = re.compile(r"^Object contains unknown field `(?P<name>[^`]*)`")
_MISSING = re.compile(r"^Object missing required field `(?P<name>[^`]*)`")
_EXPECTED = re.compile(r"^Expected `(?P<want>[^`]*)`(?P<rest>.*)$")
_WORDS = {
    "bool": "true or false (a JSON boolean)",
    "int": "an integer",
    "float": "a number",
    "int | float": "a number",
    "str": "a string",
    "str | null": "a string or null",
    "object": "an object",
    "object | null": "an object or null",
    "array": "a list",
    "array | null": "a list or null",
}


def validate_request(doc: Any, *, source: str) -> Request:
    """``doc`` as a checked ``Request``; ``InputError`` naming ``source`` and the key."""
    if not isinstance(doc, dict):
        raise InputError(f"{source}: the request must be a JSON object")
    try:
        return msgspec.convert(doc, type=Request, strict=True)
    except msgspec.ValidationError as exc:
        raise InputError(f"{source}: {_explain(str(exc), doc)}") from None


def _explain(message: str, doc: Any) -> str:
    """msgspec's ``message`` in this project's words: the key, the rule, the value."""
    at = _AT.search(message)
    path = at.group("path").lstrip(".") if at else ""
    text = message[: at.start()] if at else message
    where = f"{path}: " if path else ""
    if match := _UNKNOWN.match(text):
        return _unknown(path, match.group("name"))
    if match := _MISSING.match(text):
        return (
            f"{path} is missing key {match.group('name')!r}"
            if path
            else (f"missing key {match.group('name')!r}")
        )
    if match := _EXPECTED.match(text):
        value = _value_at(doc, path)
        want, rest = match.group("want"), match.group("rest")
        if rest.startswith(", got"):
            shown = _WORDS.get(want, f"`{want}`")
            return f"{path or 'the request'} must be {shown}, got {_shown(value)}"
        return f"{path} must be {_WORDS.get(want, want)}{rest}, got {_shown(value)}"
    return where + text


def _unknown(path: str, name: str) -> str:
    struct = _STRUCT_AT.get(re.sub(r"\[\d+\]", "[]", path))
    known: tuple[str, ...] = struct.__struct_fields__ if struct is not None else ()
    near = difflib.get_close_matches(name, known, n=1, cutoff=0.6)
    if not path and name in RENAMED_KEYS:
        near = [RENAMED_KEYS[name]]
    hint = f" (did you mean {near[0]!r}?)" if near else ""
    place = f" in {path}" if path else ""
    listed = f"; known keys: {', '.join(known)}" if known else ""
    return f"unknown key {name!r}{place}{hint}{listed}"


def _value_at(doc: Any, path: str) -> Any:
    """The value at a msgspec path such as ``chunks[0].score`` (``None`` if absent)."""
    node = doc
    for key, index in re.findall(r"([^.\[\]]+)|\[(\d+)\]", path):
        try:
            node = node[int(index)] if index else node[key]
        except (KeyError, IndexError, TypeError):
            return None
    return node


def _shown(value: Any) -> str:
    if isinstance(value, int) and not isinstance(value, bool) and abs(value) >= 10**20:
        return f"an integer of {len(str(abs(value)))} digits"
    if isinstance(value, list | dict) and len(value) > 8:  # never the repr of a huge value
        return f"{'a list' if isinstance(value, list) else 'an object'} of {len(value)} items"
    text = repr(value)
    return text if len(text) <= 60 else text[:57] + "..."
