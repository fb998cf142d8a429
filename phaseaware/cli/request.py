"""The request document of ``phaseaware assemble``: JSON in, ``phaseaware.assemble`` kwargs out.

One declared schema (:mod:`phaseaware.cli.request_schema`, msgspec) checks the
document first: unknown keys are errors (with a "did you mean"), booleans must
be JSON booleans, integers are range-checked. Keys: ``tokenizer`` (spec),
``chat_format`` (none/chatml/hf/deepseek-v4/deepseek-v4.1, default none), ``profile`` (name or path; optional),
``system`` (optional), ``messages`` (optional, in place of ``system``: a list of
``{"role", "content"}`` objects holding the literal ``{context}`` exactly once and
``{question}`` any number of times, see examples/request_messages.json),
``question``, ``chunks`` ([{id, text, score, evidence?}], read by
``Chunk.from_dict``), ``budget_tokens``, ``options`` (optional: an object of
``REQUEST_OPTION_KEYS`` plus the chat settings ``thinking``, ``reasoning_effort`` and
``server_default``: true plans with the endpoint record's ``server_default``, for a
request that will be sent stating no chat settings), ``endpoint`` (optional: an endpoint
record's path or ``{"base_url", "model"}``; its offset, or offset set, goes into
the options). See examples/request.json. Every error is an ``InputError`` that
names the file and points at the example.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, NoReturn

from phaseaware.assembly.inputs.chunks import chunks_from_request
from phaseaware.assembly.inputs.options import AssemblyOptions
from phaseaware.chat import ChatSettings
from phaseaware.chat.errors import MessageError, SlotError
from phaseaware.chat.messages import Message, parse_conversation
from phaseaware.cli.request_schema import REQUEST_KEYS, REQUEST_OPTION_KEYS
from phaseaware.errors import InputError
from phaseaware.userfiles import parse_json_document, read_user_text

if TYPE_CHECKING:
    from phaseaware.endpoints.record import EndpointRecord

__all__ = ["EXAMPLE", "REQUEST_KEYS", "REQUEST_OPTION_KEYS", "load_request", "parse_request"]

EXAMPLE = "examples/request.json"


def _fail(message: str) -> NoReturn:
    raise InputError(f"{message}; see {EXAMPLE} for a minimal valid request")


def _endpoint_options(
    ref: Any, tokenizer: str, options: AssemblyOptions, *, source: str
) -> tuple[AssemblyOptions, EndpointRecord]:
    """``options`` with the offset(s) of the endpoint record ``ref`` names (a path, or
    ``{"base_url", "model"}``), and the record (its chat settings: what its requests
    state, what the server does when they state none); ``FingerprintMismatchError``
    for another tokenizer."""
    from phaseaware.endpoints.record import resolve_endpoint, with_endpoint
    from phaseaware.tokenizers import load_tokenizer

    record = resolve_endpoint(ref, source=source)
    return with_endpoint(options, record, load_tokenizer(tokenizer)), record


def _settings(
    *,
    stated: bool | None,
    effort: str | int | None,
    use_default: bool,
    record: EndpointRecord | None,
    source: str,
) -> ChatSettings | None:
    """The request's full chat settings when it names an effort or the server default
    (``None``: thinking alone decides, as before)."""
    from phaseaware.endpoints.request_settings import record_settings

    if use_default:
        if record is None:
            _fail(
                f"{source}: options.server_default needs an 'endpoint' record (probed in exact mode)"
            )
        if stated is not None or effort is not None:
            _fail(
                f"{source}: options.server_default plans with the server's own settings; "
                "drop options.thinking/options.reasoning_effort, or drop server_default"
            )
        try:
            return record_settings(record, state_settings=False)
        except InputError as exc:
            _fail(f"{source}: {exc}")
    if effort is None:
        return None
    thinking = stated if stated is not None else bool(record is not None and record.thinking)
    try:
        return ChatSettings(thinking=thinking, reasoning_effort=effort)
    except InputError as exc:
        _fail(f"{source}: options: {exc}")


def load_request(path: str) -> dict[str, Any]:
    """Keyword arguments for ``phaseaware.assemble`` from a request file (InputError if bad).

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
    """Keyword arguments for ``phaseaware.assemble`` from a parsed request document.

    The document is checked against :mod:`phaseaware.cli.request_schema` first (unknown
    keys, JSON types, integer ranges); chunks, messages and the endpoint then go through
    the core's own validators. Every error is an ``InputError`` naming ``source``.
    """
    from phaseaware.cli.request_schema import validate_request

    try:
        request = validate_request(doc, source=source)
    except InputError as exc:
        _fail(str(exc))
    try:
        chunks = chunks_from_request(doc["chunks"], source=source)
    except InputError as exc:
        _fail(str(exc))
    messages = _messages(doc, source)
    option_values = request.option_values()
    stated = option_values.pop("thinking", None)
    effort = option_values.pop("reasoning_effort", None)
    use_default = bool(option_values.pop("server_default", False))
    thinking = bool(stated)
    record = None
    try:
        options = AssemblyOptions(**option_values)
    except InputError as exc:
        _fail(f"{source}: {exc}")
    if request.endpoint is not None:
        options, record = _endpoint_options(
            request.endpoint, request.tokenizer, options, source=source
        )
        thinking = bool(record.thinking) if stated is None else bool(stated)  # the request's wins
    settings = _settings(
        stated=stated, effort=effort, use_default=use_default, record=record, source=source
    )
    extra: dict[str, Any] = {}
    if settings is not None:
        thinking = settings.thinking
        extra["settings"] = settings
    return {
        "chunks": chunks,
        "tokenizer": request.tokenizer,
        "chat_format": request.chat_format or "none",
        "question": request.question,
        "system": request.system,
        "profile": request.profile,
        "budget_tokens": request.budget_tokens,
        "options": options,
        "thinking": thinking,
        "messages": messages,
        **extra,
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
