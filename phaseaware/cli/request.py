"""The request document of ``phaseaware assemble``: JSON in, ``assemble_from_specs`` kwargs out.

Keys: ``tokenizer`` (spec), ``template`` (none/chatml/hf/deepseek-v4, default
none), ``profile`` (name or path; optional), ``system`` (optional),
``messages`` (optional, in place of ``system``: a list of ``{"role", "content"}``
objects holding the literal ``{context}`` exactly once and ``{question}`` any
number of times, see examples/request_messages.json), ``question``, ``chunks`` ([{id, text, score, evidence?}], read by
``Chunk.from_dict``), ``budget_tokens``, ``options`` (optional:
``REQUEST_OPTION_KEYS`` plus ``thinking``), ``endpoint`` (optional: an endpoint
record's path or ``{"base_url", "model"}``; its offset, or offset set, goes into
the options). See examples/request.json. Every
error is an ``InputError`` that names the file and points at the example.
"""

from __future__ import annotations

from typing import Any, NoReturn

from phaseaware.assembly.chunks import chunks_from_request
from phaseaware.assembly.options import AssemblyOptions
from phaseaware.chat.errors import MessageError, SlotError
from phaseaware.chat.messages import Message, parse_conversation
from phaseaware.errors import InputError
from phaseaware.userfiles import parse_json_document, read_user_text

__all__ = ["EXAMPLE", "REQUEST_KEYS", "REQUEST_OPTION_KEYS", "load_request", "parse_request"]

EXAMPLE = "examples/request.json"
REQUEST_OPTION_KEYS = (
    "position_offset",
    "strategy",
    "pad",
    "repeat",
    "length_pad",
    "pad_cost",
    "allow_tokenizer_mismatch",
    "period",
    "max_keys_per_chunk",
    "repeat_max_chars",
    "control_tokens",
    "offsets",
    "robust_tolerance",
)


def _fail(message: str) -> NoReturn:
    raise InputError(f"{message}; see {EXAMPLE} for a minimal valid request")


# Every top-level key a request may have ("messages": conversation requests).
REQUEST_KEYS = (
    "tokenizer",
    "template",
    "profile",
    "system",
    "question",
    "chunks",
    "budget_tokens",
    "options",
    "messages",
    "endpoint",
)


def _endpoint_options(
    ref: Any, tokenizer: str, options: AssemblyOptions, *, source: str
) -> AssemblyOptions:
    """``options`` with the offset(s) of the endpoint record ``ref`` names (a path, or
    ``{"base_url", "model"}``); ``FingerprintMismatchError`` for another tokenizer."""
    from phaseaware.assembly.endpoint_record import apply_endpoint, resolve_endpoint
    from phaseaware.tokenizers import load_tokenizer

    return apply_endpoint(options, resolve_endpoint(ref, source=source), load_tokenizer(tokenizer))


def load_request(path: str) -> dict[str, Any]:
    """Keyword arguments for ``assemble_from_specs`` from a request file (InputError if bad).

    Only a regular file under the size cap is read (``phaseaware.userfiles``); duplicate
    keys, NaN/Infinity, huge integers, deep nesting and lone surrogates are errors.
    """
    try:
        text = read_user_text(path, what="request file")
    except InputError as exc:
        _fail(str(exc))
    doc = parse_json_document(
        text, source=f"request file {path}", hint=f"see {EXAMPLE} for a minimal valid request"
    )
    return parse_request(doc, source=path)


def parse_request(doc: Any, *, source: str = "<request>") -> dict[str, Any]:
    """Keyword arguments for ``assemble_from_specs`` from a parsed request document."""
    if not isinstance(doc, dict):
        _fail(f"{source}: the request must be a JSON object")
    unknown_keys = sorted(set(doc) - set(REQUEST_KEYS))
    if unknown_keys:
        _fail(
            f"{source}: unknown key(s) {', '.join(map(repr, unknown_keys))}; "
            f"known keys: {', '.join(REQUEST_KEYS)}"
        )
    for key in ("tokenizer", "question", "chunks", "budget_tokens"):
        if key not in doc:
            _fail(f"{source}: missing key {key!r}")
    for key in ("tokenizer", "question"):
        if not isinstance(doc[key], str):
            _fail(f"{source}: key {key!r} must be a string")
    budget = doc["budget_tokens"]
    if isinstance(budget, bool) or not isinstance(budget, int) or budget < 1:
        _fail(f"{source}: key 'budget_tokens' must be a positive integer, got {budget!r}")
    try:
        chunks = chunks_from_request(doc["chunks"], source=source)
    except InputError as exc:
        _fail(str(exc))
    options_doc = doc.get("options") or {}
    if not isinstance(options_doc, dict):
        _fail(f"{source}: key 'options' must be an object")
    unknown = sorted(set(options_doc) - set(REQUEST_OPTION_KEYS) - {"thinking"})
    if unknown:
        _fail(f"{source}: unknown key(s) in 'options': {', '.join(unknown)}")
    for key in ("template", "profile", "system"):
        if doc.get(key) is not None and not isinstance(doc[key], str):
            _fail(f"{source}: key {key!r} must be a string")
    messages = _messages(doc, source)
    options = AssemblyOptions(
        **{k: options_doc[k] for k in REQUEST_OPTION_KEYS if k in options_doc}
    )
    if doc.get("endpoint") is not None:
        options = _endpoint_options(doc["endpoint"], doc["tokenizer"], options, source=source)
    return {
        "chunks": chunks,
        "tokenizer": doc["tokenizer"],
        "layout": doc.get("template") or "none",
        "question": doc["question"],
        "system": doc.get("system"),
        "profile": doc.get("profile"),
        "budget_tokens": budget,
        "options": options,
        "thinking": bool(options_doc.get("thinking", False)),
        "messages": messages,
    }


def _messages(doc: dict[str, Any], source: str) -> tuple[Message, ...] | None:
    """The request's ``messages``, parsed and checked for one slot (typed errors)."""
    raw = doc.get("messages")
    if raw is None:
        return None
    if doc.get("system"):
        _fail(f"{source}: give either 'system' or 'messages' (put the system text in messages)")
    if not isinstance(raw, list):
        _fail(f'{source}: key \'messages\' must be a list of {{"role", "content"}} objects')
    try:
        return parse_conversation(raw).messages
    except (MessageError, SlotError) as exc:
        raise type(exc)(f"{source}: messages: {exc}") from None
