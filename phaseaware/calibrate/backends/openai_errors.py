"""Classify ``openai`` client errors: retry or fail with a message that names the fix.

Kept apart from the backend so the mapping (status -> retry / flag to fix)
is one readable table. Every message passes through :func:`redact`, so an
API key never appears in it even when a server echoes the key back.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from phaseaware.calibrate.backends.base import ProbeRequest
from phaseaware.errors import BackendError, PhaseawareError

__all__ = [
    "API_KEY_ENV_VARS",
    "ErrorContext",
    "is_retryable",
    "retry_after_s",
    "to_backend_error",
    "redact",
]

API_KEY_ENV_VARS: tuple[str, ...] = ("PHASEAWARE_API_KEY", "OPENAI_API_KEY")
RETRYABLE_STATUS: frozenset[int] = frozenset({408, 409, 429})
_CONTEXT_CUES = ("context length", "context_length", "maximum context", "too many tokens")


@dataclass(frozen=True)
class ErrorContext:
    """What messages may mention. ``key_source``: the argument or environment
    variable the key came from (``None``: no key set). ``secret`` is only used
    to redact and is excluded from the repr."""

    base_url: str
    model: str
    key_source: str | None
    secret: str = field(default="", repr=False)


def redact(text: str, secret: str) -> str:
    """``text`` with every occurrence of ``secret`` replaced by ``***``."""
    return text.replace(secret, "***") if secret else text


def _status(exc: BaseException) -> int | None:
    status = getattr(exc, "status_code", None)
    return status if isinstance(status, int) else None


def is_retryable(exc: BaseException) -> bool:
    """True for timeouts, connection errors, 408/409/429 and 5xx answers."""
    import openai

    if isinstance(exc, openai.APIConnectionError):  # includes APITimeoutError
        return True
    status = _status(exc)
    return status is not None and (status in RETRYABLE_STATUS or status >= 500)


def retry_after_s(exc: BaseException) -> float | None:
    """The server's ``Retry-After`` (or ``retry-after-ms``) in seconds, if any."""
    response = getattr(exc, "response", None)
    headers = getattr(response, "headers", None)
    if headers is None:
        return None
    for name, scale in (("retry-after-ms", 0.001), ("retry-after", 1.0)):
        value = headers.get(name)
        if value is None:
            continue
        try:
            seconds = float(value) * scale
        except ValueError:
            continue  # an HTTP date: fall back to our own backoff
        if seconds >= 0:
            return seconds
    return None


def _server_message(exc: BaseException) -> str:
    """The server's own error message (OpenAI error shape), else the exception text."""
    body = getattr(exc, "body", None)
    message = body.get("message") if isinstance(body, dict) else None
    if not isinstance(message, str) or not message:
        message = getattr(exc, "message", None) or str(exc)
    return " ".join(str(message).split())[:300]


def to_backend_error(
    exc: BaseException, ctx: ErrorContext, request: ProbeRequest, *, attempts: int
) -> PhaseawareError:
    """The ``BackendError`` (with the flag to fix) for a failed request."""
    if isinstance(exc, PhaseawareError):
        return exc
    return BackendError(redact(_describe(exc, ctx, request, attempts), ctx.secret))


def _describe(exc: BaseException, ctx: ErrorContext, request: ProbeRequest, attempts: int) -> str:
    import openai

    probe, url = request.probe_id, ctx.base_url
    tries = f"after {attempts} attempt{'s' if attempts != 1 else ''}"
    if isinstance(exc, openai.APITimeoutError):
        return (
            f"request for probe {probe} to {url} timed out {tries}: raise --timeout, "
            "lower --concurrency, or check that the server is not overloaded"
        )
    if isinstance(exc, openai.APIConnectionError):
        cause = exc.__cause__ or exc
        return (
            f"cannot reach the server at {url} ({tries}: {type(cause).__name__}): check "
            "--base-url (e.g. http://127.0.0.1:8000/v1) and that the server is running"
        )
    status = _status(exc)
    if status in (401, 403):
        return f"server at {url} refused the request (HTTP {status}): {_key_advice(ctx)}"
    if status == 404:
        return _not_found(exc, ctx)
    message = _server_message(exc)
    if status in (400, 413, 422) and any(cue in message.lower() for cue in _CONTEXT_CUES):
        return (
            f"probe {probe} ({request.prompt_tokens} prompt tokens + {request.max_tokens} to "
            f"generate) does not fit the context of {ctx.model!r} at {url}: lower "
            f"--context-tokens (server said: {message})"
        )
    if status is not None:
        return f"server at {url} answered HTTP {status} for probe {probe} {tries}: {message}"
    return f"unexpected error talking to {url} for probe {probe}: {type(exc).__name__}: {exc}"


def _key_advice(ctx: ErrorContext) -> str:
    env = " or ".join(API_KEY_ENV_VARS)
    if ctx.key_source is None:
        return f"no API key is set; set {env} to a key the server accepts"
    if ctx.key_source == "api_key":
        return f"the api_key passed in was rejected; pass a valid key (or set {env})"
    return f"the key in {ctx.key_source} was rejected; set {ctx.key_source} to a valid key"


def _not_found(exc: Any, ctx: ErrorContext) -> str:
    code = getattr(exc, "code", None)
    message = _server_message(exc)
    if code == "model_not_found" or "model" in message.lower():
        return (
            f"model {ctx.model!r} not found at {ctx.base_url}: check --model "
            f"(GET {ctx.base_url}/models lists the served models; server said: {message})"
        )
    return (
        f"{ctx.base_url} has no such endpoint (HTTP 404: {message}): check --base-url "
        "(it usually ends in /v1) and --endpoint (chat or completions)"
    )
