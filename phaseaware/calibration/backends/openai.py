"""Calibration backend for OpenAI-compatible HTTP servers (vLLM, SGLang, OpenAI, ...).

Sends each probe with temperature 0 through the official ``openai`` client
(imported when the backend is built). A group's variants are submitted to a
bounded thread pool back to back, in order, so requests sharing a prefix
reach the server together and its prefix cache can hit. Completions are
yielded as they finish.

Retries are the client's own (``OpenAI(max_retries=..., timeout=...)``): it
retries timeouts, connection errors, 408, 409, 429 and 5xx with exponential
backoff and jitter, honouring ``Retry-After`` / ``retry-after-ms``. ``timeout``
bounds each whole attempt, connect to last byte, and responses are capped in size
(:mod:`phaseaware.httpclient`). Every failure the client gives up on becomes a
:class:`~phaseaware.errors.BackendError` that names the flag to fix and how
many attempts were made (read from the ``x-stainless-retry-count`` header the
client puts on every attempt; an httpx request hook counts the retries).

Token check: the server's ``usage.prompt_tokens`` must equal
``request.prompt_tokens + prompt_token_offset``
(:func:`~phaseaware.calibration.backends.base.prompt_token_mismatch`, the rule
batch results follow too). A mismatch means the server tokenizes or templates
the prompt differently from phaseaware, so every measured position (and
residue) would be wrong. An offset of 1 is for servers that add BOS
themselves; it also shifts every absolute position, so the runner logs key
positions and prompt lengths shifted by it (see
:mod:`phaseaware.calibration.runner`). Negative offsets are refused.

The API key comes from ``api_key``, else the environment variables in
``API_KEY_ENV_VARS``. It is never stored on the backend, logged, or put in a
message or repr: every message passes through :func:`redact`, even when a
server echoes the key back.
"""

from __future__ import annotations

import os
import threading
from collections.abc import Iterator, Mapping, Sequence
from concurrent.futures import FIRST_COMPLETED, Future, ThreadPoolExecutor, wait
from dataclasses import dataclass, field
from typing import Any

from phaseaware.assembly.inputs.options import check_position_offset
from phaseaware.calibration.backends.base import (
    API_KEY_ENV_VARS,
    Completion,
    ProbeRequest,
    bad_token_count,
    prompt_token_mismatch,
)
from phaseaware.calibration.backends.shape import MalformedResponse, response_text
from phaseaware.errors import BackendError, PhaseawareError
from phaseaware.extras import missing_message
from phaseaware.redact import redact as redact_text
from phaseaware.redact import redact_url

__all__ = ["OpenAIBackend", "API_KEY_ENV_VARS", "ErrorContext", "redact", "to_backend_error"]

RETRY_COUNT_HEADER = "x-stainless-retry-count"  # sent by the openai client on every attempt
_CONTEXT_CUES = ("context length", "context_length", "maximum context", "too many tokens")

_NO_KEY = "phaseaware-no-key"  # sent when no key is configured (local servers ignore it)


def resolve_api_key(api_key: str | None) -> tuple[str, str | None]:
    """(key, where it came from); where is ``None`` when no key is configured. A key no
    HTTP header can carry (a newline, non-ASCII) is refused, naming where it came from."""
    from phaseaware.credentials import check_api_key

    if api_key:
        return check_api_key(api_key, source="api_key", error=BackendError), "api_key"
    for name in API_KEY_ENV_VARS:
        value = os.environ.get(name)
        if value:
            return check_api_key(value, source=f"${name}", error=BackendError), name
    return _NO_KEY, None


class OpenAIBackend:
    """Generation backend talking to ``base_url`` (e.g. ``http://host:8000/v1``).

    ``endpoint``: ``"chat"`` sends ``request.messages`` to
    ``/chat/completions``; ``"completions"`` sends ``request.prompt`` to
    ``/completions``. ``concurrency``: requests in flight at most.
    ``timeout``: seconds per HTTP attempt. ``max_retries``: retries per request
    (the client's backoff; see the module docstring). ``model_info``: what the
    server cannot tell about the model (``{"local_window": N}``), for the log header.
    ``chat_template_kwargs``: the chat settings every chat request states (see
    :mod:`phaseaware.endpoints.request_settings`), so no server default renders the probes.
    """

    name = "openai-http"

    def __init__(
        self,
        base_url: str,
        model: str,
        *,
        endpoint: str = "chat",
        api_key: str | None = None,
        concurrency: int = 4,
        max_retries: int = 5,
        timeout: float = 60.0,
        expected_prompt_tokens_check: bool = True,
        prompt_token_offset: int = 0,
        model_info: Mapping[str, Any] | None = None,
        chat_template_kwargs: Mapping[str, Any] | None = None,
    ) -> None:
        _validate(base_url, model, endpoint, concurrency, max_retries, timeout)
        check_position_offset(prompt_token_offset, name="--prompt-token-offset", error=BackendError)
        self.base_url = base_url.rstrip("/")
        self.model = model
        self.endpoint = endpoint
        self.concurrency = concurrency
        self.max_retries = max_retries
        self.timeout = float(timeout)
        self.expected_prompt_tokens_check = expected_prompt_tokens_check
        self.prompt_token_offset = prompt_token_offset
        self.model_info: dict[str, Any] = dict(model_info or {})
        self.chat_template_kwargs = dict(chat_template_kwargs) if chat_template_kwargs else None
        self._lock = threading.Lock()
        self._retries = 0
        key, key_source = resolve_api_key(api_key)
        self._context = ErrorContext(redact_url(self.base_url), model, key_source, secret=key)
        self._client = _make_client(
            self.base_url, key, self.timeout, max_retries, on_request=self._count_retry
        )
        self._pool: ThreadPoolExecutor | None = None

    @property
    def retry_count(self) -> int:
        """Attempts retried so far (all requests together)."""
        with self._lock:
            return self._retries

    def _count_retry(self, request: Any) -> None:
        """httpx request hook: every attempt after a request's first is a retry."""
        if request.headers.get(RETRY_COUNT_HEADER, "0") != "0":
            with self._lock:
                self._retries += 1

    def complete(self, group: Sequence[ProbeRequest]) -> Iterator[Completion]:
        """Send every request of ``group`` (in order) and yield completions as they finish.

        On the first failure the requests not yet started are cancelled and
        a ``BackendError`` is raised; completions yielded before stand.
        """
        if self._client is None:
            raise BackendError("this OpenAIBackend is closed; create a new one")
        requests = list(group)
        if self.endpoint == "chat":
            for request in requests:
                if request.messages is None:
                    raise BackendError(
                        f"probe {request.probe_id} has no chat messages: use a chat layout "
                        "(--chat-format) or send plain prompts with --endpoint completions"
                    )
        if self._pool is None:
            self._pool = ThreadPoolExecutor(self.concurrency, thread_name_prefix="phaseaware-http")
        pending: set[Future[Completion]] = {self._pool.submit(self._send, r) for r in requests}
        try:
            while pending:
                done, pending = wait(pending, return_when=FIRST_COMPLETED)
                failures = [e for e in (f.exception() for f in done) if e is not None]
                for future in done:  # hand over every finished completion before failing
                    if future.exception() is None:
                        yield future.result()
                if failures:
                    raise failures[0]
        finally:
            for future in pending:
                future.cancel()

    def close(self) -> None:
        """Stop the worker threads and close the HTTP connections (idempotent)."""
        if self._pool is not None:
            self._pool.shutdown(wait=True, cancel_futures=True)
            self._pool = None
        if self._client is not None:
            self._client.close()
            self._client = None

    def __enter__(self) -> OpenAIBackend:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def __repr__(self) -> str:
        return (
            f"OpenAIBackend(base_url={redact_url(self.base_url)!r}, model={self.model!r}, "
            f"endpoint={self.endpoint!r}, concurrency={self.concurrency})"
        )

    def _send(self, request: ProbeRequest) -> Completion:
        try:
            response = self._call(request)
        except Exception as exc:
            raise to_backend_error(exc, self._context, request) from None
        return self._to_completion(request, response)

    def _call(self, request: ProbeRequest) -> Any:
        client = self._client
        if client is None:
            raise BackendError("this OpenAIBackend was closed while requests were running")
        common = {"model": self.model, "max_tokens": request.max_tokens, "temperature": 0}
        if self.endpoint == "chat":
            messages = [dict(m) for m in request.messages or ()]
            if self.chat_template_kwargs is not None:
                common["extra_body"] = {"chat_template_kwargs": self.chat_template_kwargs}
            return client.chat.completions.create(messages=messages, **common)
        return client.completions.create(prompt=request.prompt, **common)

    def _to_completion(self, request: ProbeRequest, response: Any) -> Completion:
        try:  # the shape is checked first: a malformed body is an error, never an answer
            text = response_text(response, endpoint=self.endpoint)
        except MalformedResponse as exc:
            raise BackendError(
                f"server at {redact_url(self.base_url)} returned a malformed response for "
                f"probe {request.probe_id} ({exc}); check that --base-url points at an "
                "OpenAI-compatible server"
            ) from None
        usage = getattr(response, "usage", None)
        reported = _usage_prompt_tokens(usage)
        bad = bad_token_count(reported, source=redact_url(self.base_url), probe_id=request.probe_id)
        if bad is not None:  # never logged, checked or not
            raise BackendError(bad)
        if self.expected_prompt_tokens_check:
            problem = prompt_token_mismatch(
                request, reported, self.prompt_token_offset, source=redact_url(self.base_url)
            )
            if problem is not None:
                raise BackendError(problem)
        return Completion(request.probe_id, text, reported_prompt_tokens=reported)


def _usage_prompt_tokens(usage: Any) -> Any:
    """``usage.prompt_tokens`` as sent (checked by ``bad_token_count``); a ``usage`` that is
    no object reads as its own value, so it is refused as no count."""
    if usage is None:
        return None
    if isinstance(usage, str | bytes | int | float | bool | list | tuple):
        return usage
    if isinstance(usage, dict):
        return usage.get("prompt_tokens")
    return getattr(usage, "prompt_tokens", None)


def _validate(
    base_url: str,
    model: str,
    endpoint: str,
    concurrency: int,
    max_retries: int,
    timeout: float,
) -> None:
    if not isinstance(base_url, str) or not base_url.startswith(("http://", "https://")):
        raise BackendError(
            f"--base-url must start with http:// or https:// (e.g. http://127.0.0.1:8000/v1), "
            f"got {redact_text(str(base_url))!r}"
        )
    if not model:
        raise BackendError("--model is required: the model name the server serves")
    if endpoint not in ("chat", "completions"):
        raise BackendError(f"--endpoint must be 'chat' or 'completions', got {endpoint!r}")
    if concurrency < 1:
        raise BackendError(f"--concurrency must be >= 1, got {concurrency}")
    if max_retries < 0:
        raise BackendError(f"--max-retries must be >= 0, got {max_retries}")
    if timeout <= 0:
        raise BackendError(f"--timeout must be > 0 seconds, got {timeout}")


def _make_client(
    base_url: str, api_key: str, timeout: float, max_retries: int, *, on_request: Any
) -> Any:
    try:
        import openai  # noqa: F401 (the client's package: a missing extra fails here)
    except ImportError as exc:
        raise BackendError(missing_message("openai", what="the HTTP backend")) from exc
    from phaseaware.httpclient import openai_client

    return openai_client(
        base_url, api_key=api_key, timeout=timeout, max_retries=max_retries, on_request=on_request
    )


# ---------------------------------------------------------------------- errors


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
    """``text`` with ``secret`` and URL credentials (``phaseaware.redact``) as ``***``."""
    return redact_text(text.replace(secret, "***") if secret else text)


def _status(exc: BaseException) -> int | None:
    status = getattr(exc, "status_code", None)
    return status if isinstance(status, int) else None


def _attempts(exc: BaseException) -> int:
    """Attempts the client made before ``exc``: its last request's retry count plus one."""
    request = getattr(exc, "request", None)
    headers = getattr(request, "headers", None)
    try:
        return int(headers.get(RETRY_COUNT_HEADER, "0")) + 1 if headers is not None else 1
    except ValueError:
        return 1


def _server_message(exc: BaseException) -> str:
    """The server's own error message (OpenAI error shape), else the exception text."""
    body = getattr(exc, "body", None)
    message = body.get("message") if isinstance(body, dict) else None
    if not isinstance(message, str) or not message:
        message = getattr(exc, "message", None) or str(exc)
    return " ".join(str(message).split())[:300]


def to_backend_error(
    exc: BaseException, ctx: ErrorContext, request: ProbeRequest
) -> PhaseawareError:
    """The ``BackendError`` (with the flag to fix) for a request the client gave up on."""
    if isinstance(exc, PhaseawareError):
        return exc
    return BackendError(redact(_describe(exc, ctx, request, _attempts(exc)), ctx.secret))


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
        from phaseaware.httpclient import transport_problem

        problem = transport_problem(exc)
        if problem is not None:
            return f"request for probe {probe} to {url} failed {tries}: {problem}"
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
