"""The OpenAI wire protocol of the local server: body decoding, validation, response bodies.

:func:`decode_json_body` turns request bytes into a JSON object or raises
:class:`RequestError` (400) for every way a body can be wrong: not UTF-8, not JSON,
``NaN``/``Infinity``, duplicate keys, nesting deeper than ``max_depth`` (checked by a
linear scan BEFORE the recursive parser runs, so no body can exhaust the stack), a
lone surrogate (``"\\ud800"`` decodes to a string no tokenizer can encode) or a top
level that is not an object.

:func:`parse_chat_request` / :func:`parse_completion_request` turn a decoded body into
:class:`CompletionParams` or raise :class:`RequestError` carrying the HTTP status, a
message that names the bad field, the OpenAI ``param`` and ``code``. Unknown fields are
ignored (clients send many optional ones); fields the server cannot honour (``n > 1``) are
rejected rather than silently ignored.

The response bodies are :mod:`phaseaware.reference.openai_responses`.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import numpy as np

__all__ = [
    "DEFAULT_MAX_JSON_DEPTH",
    "CompletionParams",
    "RequestError",
    "decode_json_body",
    "error_body",
    "outside_strings",
    "value_estimate",
    "parse_chat_request",
    "parse_completion_request",
]

DEFAULT_MAX_TOKENS = 16
DEFAULT_MAX_JSON_DEPTH = 32
_MAX_STOP = 4


@dataclass(frozen=True)
class CompletionParams:
    """A validated request: ``messages`` for chat, ``prompt`` for completions."""

    model: str
    prompt: str
    messages: tuple[dict[str, str], ...] | None
    max_tokens: int
    temperature: float
    stop: tuple[str, ...]
    stream: bool = False
    include_usage: bool = False


class RequestError(Exception):
    """A request the server answers with an error (HTTP ``status``); ``retry_after_s``:
    the ``Retry-After`` header of a 429 (seconds)."""

    def __init__(
        self,
        status: int,
        message: str,
        *,
        param: str | None,
        code: str | None = None,
        type_: str = "invalid_request_error",
        retry_after_s: int | None = None,
    ) -> None:
        super().__init__(message)
        self.status = status
        self.message = message
        self.param = param
        self.code = code
        self.type_ = type_
        self.retry_after_s = retry_after_s

    def to_body(self) -> dict[str, Any]:
        """The OpenAI error object for this answer."""
        return error_body(
            self.status, self.message, type_=self.type_, param=self.param, code=self.code
        )


def _bad(message: str, param: str | None, code: str | None = None) -> RequestError:
    return RequestError(400, message, param=param, code=code)


def parse_chat_request(
    body: Mapping[str, Any],
    *,
    model_name: str,
    max_messages: int | None = None,
    max_chars: int | None = None,
) -> CompletionParams:
    """Validate a ``/v1/chat/completions`` body for the model ``model_name``: at most
    ``max_messages`` messages, whose contents hold at most ``max_chars`` characters
    together (``None``: no bound)."""
    model = _model(body, model_name)
    if "messages" not in body:
        raise _bad(
            "Missing required parameter: 'messages'.", "messages", "missing_required_parameter"
        )
    raw = body["messages"]
    if not isinstance(raw, list) or not raw:
        raise _bad("'messages' must be a non-empty array of message objects.", "messages")
    if max_messages is not None and len(raw) > max_messages:
        raise _bad(
            f"'messages' holds {len(raw)} messages; this server takes at most {max_messages} "
            "per request.",
            "messages",
            "too_many_messages",
        )
    messages = tuple(_message(m, i) for i, m in enumerate(raw))
    chars = sum(len(m["content"]) for m in messages)
    if max_chars is not None and chars > max_chars:
        raise _bad(
            f"the messages hold {chars} characters; this server takes at most {max_chars} "
            "per request.",
            "messages",
            "context_length_exceeded",
        )
    max_tokens = _max_tokens(body, ("max_completion_tokens", "max_tokens"))
    stream, include_usage = _stream(body)
    return CompletionParams(
        model, "", messages, max_tokens, _temperature(body), _stop(body), stream, include_usage
    )


def parse_completion_request(
    body: Mapping[str, Any], *, model_name: str, max_chars: int | None = None
) -> CompletionParams:
    """Validate a ``/v1/completions`` body for the model ``model_name`` (a prompt of at
    most ``max_chars`` characters; ``None``: no bound)."""
    model = _model(body, model_name)
    if "prompt" not in body:
        raise _bad("Missing required parameter: 'prompt'.", "prompt", "missing_required_parameter")
    prompt = body["prompt"]
    if isinstance(prompt, list) and len(prompt) == 1 and isinstance(prompt[0], str):
        prompt = prompt[0]
    if not isinstance(prompt, str):
        raise _bad("'prompt' must be a string (or a list holding one string).", "prompt")
    if not prompt:  # no token to continue from: a client mistake, not a server fault
        raise _bad("'prompt' must not be empty: give at least one character to continue.", "prompt")
    if max_chars is not None and len(prompt) > max_chars:
        raise _bad(
            f"'prompt' holds {len(prompt)} characters; this server takes at most {max_chars} "
            "per request.",
            "prompt",
            "context_length_exceeded",
        )
    max_tokens = _max_tokens(body, ("max_tokens",))
    stream, include_usage = _stream(body)
    return CompletionParams(
        model, prompt, None, max_tokens, _temperature(body), _stop(body), stream, include_usage
    )


def _model(body: Mapping[str, Any], model_name: str) -> str:
    _unsupported(body)
    if "model" not in body:
        raise _bad("Missing required parameter: 'model'.", "model", "missing_required_parameter")
    model = body["model"]
    if not isinstance(model, str) or not model:
        raise _bad("'model' must be a non-empty string.", "model")
    if model != model_name:
        raise RequestError(
            404,
            f"The model '{model}' does not exist; this server serves '{model_name}'.",
            param="model",
            code="model_not_found",
        )
    return model


def _unsupported(body: Mapping[str, Any]) -> None:
    n = body.get("n", 1)
    if n is not None and (isinstance(n, bool) or not isinstance(n, int) or n != 1):
        raise _bad(f"Only n=1 is supported, got n={n!r}.", "n")


def _message(value: Any, index: int) -> dict[str, str]:
    param = f"messages[{index}]"
    if not isinstance(value, dict):
        raise _bad(f"'{param}' must be an object with 'role' and 'content'.", param)
    role = value.get("role")
    if role not in ("system", "developer", "user", "assistant"):
        raise _bad(f"'{param}.role' must be system, developer, user or assistant.", f"{param}.role")
    content = value.get("content")
    if isinstance(content, list):  # content parts: only text parts are meaningful here
        texts = [p.get("text") for p in content if isinstance(p, dict) and p.get("type") == "text"]
        strings = [t for t in texts if isinstance(t, str)]
        if len(strings) != len(content):
            raise _bad(f"'{param}.content' parts must all be text parts.", f"{param}.content")
        content = "".join(strings)
    if not isinstance(content, str):
        raise _bad(f"'{param}.content' must be a string.", f"{param}.content")
    return {"role": str(role), "content": content}


def _stream(body: Mapping[str, Any]) -> tuple[bool, bool]:
    """``(stream, include_usage)`` from ``stream`` and ``stream_options``."""
    stream = body.get("stream")
    if stream is not None and not isinstance(stream, bool):
        raise _bad(f"'stream' must be true or false, got {stream!r}.", "stream")
    options = body.get("stream_options")
    if options is None:
        return bool(stream), False
    if not stream:
        raise _bad(
            "'stream_options' is only allowed when 'stream' is true; drop it or set stream=true.",
            "stream_options",
        )
    if not isinstance(options, dict):
        raise _bad(
            "'stream_options' must be an object like {\"include_usage\": true}.", "stream_options"
        )
    include_usage = options.get("include_usage", False)
    if include_usage is not None and not isinstance(include_usage, bool):
        raise _bad(
            f"'stream_options.include_usage' must be true or false, got {include_usage!r}.",
            "stream_options.include_usage",
        )
    return True, bool(include_usage)


def _max_tokens(body: Mapping[str, Any], names: tuple[str, ...]) -> int:
    for name in names:
        value = body.get(name)
        if value is None:
            continue
        if isinstance(value, bool) or not isinstance(value, int) or value < 1:
            raise _bad(f"'{name}' must be a positive integer, got {value!r}.", name)
        return value
    return DEFAULT_MAX_TOKENS


def _temperature(body: Mapping[str, Any]) -> float:
    value = body.get("temperature")
    if value is None:
        return 1.0
    if isinstance(value, bool) or not isinstance(value, int | float) or not 0 <= value <= 2:
        raise _bad(f"'temperature' must be a number in [0, 2], got {value!r}.", "temperature")
    return float(value)


def _stop(body: Mapping[str, Any]) -> tuple[str, ...]:
    value = body.get("stop")
    if value is None:
        return ()
    if isinstance(value, str):
        value = [value]
    if (
        not isinstance(value, list)
        or len(value) > _MAX_STOP
        or not all(isinstance(s, str) and s for s in value)
    ):
        raise _bad(f"'stop' must be a string or up to {_MAX_STOP} non-empty strings.", "stop")
    return tuple(value)


def error_body(
    status: int, message: str, *, type_: str, param: str | None = None, code: str | None = None
) -> dict[str, Any]:
    """The OpenAI error object for an HTTP ``status`` answer."""
    return {"error": {"message": message, "type": type_, "param": param, "code": code}}


def decode_json_body(
    raw: bytes, *, max_depth: int = DEFAULT_MAX_JSON_DEPTH, max_items: int | None = None
) -> dict[str, Any]:
    """The JSON object in ``raw``, or :class:`RequestError` (400, ``param=None``).

    ``max_depth``: most nested arrays/objects (the top-level object counts as 1);
    ``max_items``: most values in arrays and objects together (``None``: no bound),
    counted in one pass over the bytes before any is decoded.
    """
    if not raw.strip():
        raise _bad("Invalid JSON in request: empty body.", None)
    if max_items is not None:
        # Cheap first (bytes.count, no regex): every string is a key or a value, so at
        # least (unescaped quotes / 2) / 2 values; a body of a million tiny objects is
        # refused here in milliseconds, before the string scan below costs a second.
        strings = (raw.count(b'"') - raw.count(b'\\"')) // 2
        if strings // 2 > max_items:
            raise _too_many(f"at least {strings // 2}", max_items)
    outside = outside_strings(raw)
    depth = _nesting_depth(outside)
    if depth > max_depth:
        raise _bad(
            f"Invalid JSON in request: nested {depth} levels deep; at most {max_depth} allowed.",
            None,
        )
    items = outside.count(b",") + outside.count(b"{") + outside.count(b"[")
    if max_items is not None and items > max_items:
        raise _too_many(f"about {items}", max_items)
    try:
        value = json.loads(raw, object_pairs_hook=_unique_keys, parse_constant=_no_constant)
    except RequestError:
        raise
    except (ValueError, RecursionError) as exc:  # JSONDecodeError, UnicodeDecodeError, ...
        raise _bad(f"Invalid JSON in request: {_first_line(exc)}", None) from None
    if not isinstance(value, dict):
        raise _bad("Invalid JSON in request: body is not a JSON object.", None)
    _reject_lone_surrogates(value, "body")
    return value


def _too_many(count: str, max_items: int) -> RequestError:
    return _bad(
        f"Invalid JSON in request: {count} values; this server takes at most {max_items} "
        "per request.",
        None,
    )


def value_estimate(raw: bytes) -> int:
    """About how many JSON values ``raw`` holds, from its brackets and commas (strings
    included, so never fewer than outside them): microseconds for any body."""
    return raw.count(b"{") + raw.count(b"[") + raw.count(b",")


def outside_strings(raw: bytes) -> bytes:
    """``raw`` (JSON) with every string removed, quotes included: what the depth and value
    counts read. Linear, in a few C passes over the bytes (no regex, no Python loop):
    escaped backslashes, then escaped quotes, are dropped (left to right, as a JSON parser
    pairs them), and the text between the remaining quotes is cut out. Bytes that are not
    valid JSON give some string; :func:`json.loads` refuses them afterwards."""
    if b"\\" in raw:
        raw = raw.replace(b"\\\\", b"").replace(b'\\"', b"")
    return b"".join(raw.split(b'"')[0::2])


_NOT_BRACKETS = bytes(b for b in range(256) if b not in b"[]{}")
_BRACKET_STEP = np.zeros(256, dtype=np.int32)
_BRACKET_STEP[[ord("["), ord("{")]] = 1
_BRACKET_STEP[[ord("]"), ord("}")]] = -1


def _nesting_depth(outside: bytes) -> int:
    """Deepest bracket nesting of ``outside`` (a body with its JSON strings removed;
    linear time, no recursion)."""
    brackets = outside.translate(None, _NOT_BRACKETS)
    if not brackets:
        return 0
    steps = _BRACKET_STEP[np.frombuffer(brackets, dtype=np.uint8)]
    return int(max(0, int(np.cumsum(steps).max())))


def _unique_keys(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for key, value in pairs:
        if key in out:
            raise _bad(f"Invalid JSON in request: duplicate key {key!r}.", None)
        out[key] = value
    return out


def _no_constant(name: str) -> Any:
    raise _bad(f"Invalid JSON in request: {name} is not a JSON number.", None)


def _reject_lone_surrogates(value: Any, where: str) -> None:
    """Raise 400 if any string (key or value) holds a lone UTF-16 surrogate.

    Recursion is bounded: the body's depth was checked before parsing."""
    if isinstance(value, str):
        try:
            value.encode("utf-8")
        except UnicodeEncodeError:
            raise _bad(
                f"Invalid JSON in request: a string in {where} holds a lone surrogate "
                "(an unpaired \\uD800-\\uDFFF escape); send valid Unicode.",
                None,
            ) from None
    elif isinstance(value, dict):
        for key, item in value.items():
            _reject_lone_surrogates(key, where)
            _reject_lone_surrogates(item, where)
    elif isinstance(value, list):
        for item in value:
            _reject_lone_surrogates(item, where)


def _first_line(exc: BaseException) -> str:
    text = str(exc) or type(exc).__name__
    return text.splitlines()[0][:200]
