"""Calibration backend for OpenAI-compatible HTTP servers (vLLM, SGLang, OpenAI, ...).

Sends each probe with temperature 0 through the official ``openai`` client
(imported when the backend is built). A group's variants are submitted to a
bounded thread pool back to back, in order, so requests sharing a prefix
reach the server together and its prefix cache can hit. Completions are
yielded as they finish.

Retries are done here, not by the client (``max_retries=0`` there): 408,
409, 429, 5xx, timeouts and connection errors are retried up to
``max_retries`` times with exponential backoff and jitter (``Retry-After``
honoured up to ``backoff_max_s``). Every other failure becomes a
:class:`~phaseaware.errors.BackendError` that names the flag to fix.

Token check: the server's ``usage.prompt_tokens`` must equal
``request.prompt_tokens + prompt_token_offset``. A mismatch means the server
tokenizes or templates the prompt differently from phaseaware, so every
measured position (and residue) would be wrong. An offset of 1 is for
servers that add BOS themselves; it also shifts every absolute position,
so the runner logs key positions and prompt lengths shifted by it (see
:mod:`phaseaware.calibrate.runner`). Negative offsets are refused.

The API key comes from ``api_key``, else ``PHASEAWARE_API_KEY``, else
``OPENAI_API_KEY``. It is never stored on the backend, logged, or put in a
message or repr.
"""

from __future__ import annotations

import os
import random
import threading
import time
from collections.abc import Callable, Iterator, Sequence
from concurrent.futures import FIRST_COMPLETED, Future, ThreadPoolExecutor, wait
from typing import Any

from phaseaware.calibrate.backends.base import Completion, ProbeRequest
from phaseaware.calibrate.backends.openai_errors import (
    API_KEY_ENV_VARS,
    ErrorContext,
    is_retryable,
    retry_after_s,
    to_backend_error,
)
from phaseaware.errors import BackendError

__all__ = ["OpenAIBackend", "API_KEY_ENV_VARS"]

_NO_KEY = "phaseaware-no-key"  # sent when no key is configured (local servers ignore it)


def _resolve_api_key(api_key: str | None) -> tuple[str, str | None]:
    """(key, where it came from); where is ``None`` when no key is configured."""
    if api_key:
        return api_key, "api_key"
    for name in API_KEY_ENV_VARS:
        value = os.environ.get(name)
        if value:
            return value, name
    return _NO_KEY, None


class OpenAIBackend:
    """Generation backend talking to ``base_url`` (e.g. ``http://host:8000/v1``).

    ``endpoint``: ``"chat"`` sends ``request.messages`` to
    ``/chat/completions``; ``"completions"`` sends ``request.prompt`` to
    ``/completions``. ``concurrency``: requests in flight at most.
    ``timeout``: seconds per HTTP attempt. ``sleep`` and ``seed`` make the
    backoff testable (defaults: ``time.sleep``, unseeded jitter).
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
        backoff_base_s: float = 0.5,
        backoff_max_s: float = 30.0,
        sleep: Callable[[float], None] = time.sleep,
        seed: int | None = None,
    ) -> None:
        _validate(base_url, model, endpoint, concurrency, max_retries, timeout, backoff_base_s)
        if isinstance(prompt_token_offset, bool) or not isinstance(prompt_token_offset, int):
            raise BackendError(
                f"--prompt-token-offset must be an integer, got {prompt_token_offset!r}"
            )
        if prompt_token_offset < 0:
            raise BackendError(
                f"--prompt-token-offset must be >= 0 (tokens the server adds itself, e.g. 1 "
                f"for a BOS), got {prompt_token_offset}"
            )
        self.base_url = base_url.rstrip("/")
        self.model = model
        self.endpoint = endpoint
        self.concurrency = concurrency
        self.max_retries = max_retries
        self.timeout = float(timeout)
        self.expected_prompt_tokens_check = expected_prompt_tokens_check
        self.prompt_token_offset = prompt_token_offset
        self._backoff = (float(backoff_base_s), float(backoff_max_s))
        self._sleep = sleep
        self._rng = random.Random(seed)
        self._lock = threading.Lock()
        self._retries = 0
        key, key_source = _resolve_api_key(api_key)
        self._context = ErrorContext(self.base_url, model, key_source, secret=key)
        self._client = _make_client(self.base_url, key, self.timeout)
        self._pool: ThreadPoolExecutor | None = None

    @property
    def retry_count(self) -> int:
        """Attempts retried so far (all requests together)."""
        with self._lock:
            return self._retries

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
                        "(--template) or send plain prompts with --endpoint completions"
                    )
        if self._pool is None:
            self._pool = ThreadPoolExecutor(self.concurrency, thread_name_prefix="phaseaware-http")
        pending: set[Future[Completion]] = {self._pool.submit(self._send, r) for r in requests}
        try:
            while pending:
                done, pending = wait(pending, return_when=FIRST_COMPLETED)
                failures = [f.exception() for f in done if f.exception() is not None]
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
            f"OpenAIBackend(base_url={self.base_url!r}, model={self.model!r}, "
            f"endpoint={self.endpoint!r}, concurrency={self.concurrency})"
        )

    def _send(self, request: ProbeRequest) -> Completion:
        attempt = 0
        while True:
            try:
                response = self._call(request)
                break
            except Exception as exc:
                if not is_retryable(exc) or attempt >= self.max_retries:
                    raise to_backend_error(
                        exc, self._context, request, attempts=attempt + 1
                    ) from None
                self._sleep(self._backoff_s(attempt, retry_after_s(exc)))
                attempt += 1
                with self._lock:
                    self._retries += 1
        return self._to_completion(request, response)

    def _call(self, request: ProbeRequest) -> Any:
        client = self._client
        if client is None:
            raise BackendError("this OpenAIBackend was closed while requests were running")
        common = {"model": self.model, "max_tokens": request.max_tokens, "temperature": 0}
        if self.endpoint == "chat":
            messages = [dict(m) for m in request.messages or ()]
            return client.chat.completions.create(messages=messages, **common)
        return client.completions.create(prompt=request.prompt, **common)

    def _backoff_s(self, attempt: int, retry_after: float | None) -> float:
        base, cap = self._backoff
        with self._lock:
            jitter = 0.5 + 0.5 * self._rng.random()
        delay = min(cap, base * 2**attempt) * jitter
        if retry_after is not None:
            delay = max(delay, min(cap, retry_after))
        return delay

    def _to_completion(self, request: ProbeRequest, response: Any) -> Completion:
        choices = getattr(response, "choices", None) or []
        if not choices:
            raise BackendError(
                f"server at {self.base_url} returned no choices for probe {request.probe_id}; "
                "check that --base-url points at an OpenAI-compatible server"
            )
        choice = choices[0]
        if self.endpoint == "chat":
            message = getattr(choice, "message", None)
            text = (getattr(message, "content", None) or "") if message is not None else ""
        else:
            text = getattr(choice, "text", None) or ""
        usage = getattr(response, "usage", None)
        reported = getattr(usage, "prompt_tokens", None) if usage is not None else None
        if self.expected_prompt_tokens_check:
            check_prompt_tokens(request, reported, self.prompt_token_offset, source=self.base_url)
        return Completion(request.probe_id, text, reported_prompt_tokens=reported)


def check_prompt_tokens(
    request: ProbeRequest, reported: int | None, offset: int, *, source: str
) -> None:
    """Raise ``BackendError`` unless ``reported == request.prompt_tokens + offset``."""
    if reported is None:
        raise BackendError(
            f"{source} reported no usage.prompt_tokens for probe {request.probe_id}, so "
            "phaseaware cannot confirm the server saw the same tokens; use a server that "
            "reports usage, or disable the check (--no-prompt-token-check) at your own risk"
        )
    expected = request.prompt_tokens + offset
    if int(reported) != expected:
        shown = f"{request.prompt_tokens}" + (f" (+{offset} offset)" if offset else "")
        raise BackendError(
            f"server counted {reported} prompt tokens for probe {request.probe_id}, phaseaware "
            f"counted {shown}: wrong --tokenizer or --template? If the server adds BOS itself, "
            "pass --prompt-token-offset with the difference (positions then shift by it too)"
        )


def _validate(
    base_url: str,
    model: str,
    endpoint: str,
    concurrency: int,
    max_retries: int,
    timeout: float,
    backoff_base_s: float,
) -> None:
    if not isinstance(base_url, str) or not base_url.startswith(("http://", "https://")):
        raise BackendError(
            f"--base-url must start with http:// or https:// (e.g. http://127.0.0.1:8000/v1), "
            f"got {base_url!r}"
        )
    if not model:
        raise BackendError("--model is required: the model name the server serves")
    if endpoint not in ("chat", "completions"):
        raise BackendError(f"--endpoint must be 'chat' or 'completions', got {endpoint!r}")
    if concurrency < 1:
        raise BackendError(f"--concurrency must be >= 1, got {concurrency}")
    if max_retries < 0:
        raise BackendError(f"--max-retries must be >= 0, got {max_retries}")
    if timeout <= 0 or backoff_base_s < 0:
        raise BackendError(f"--timeout must be > 0 seconds, got {timeout}")


def _make_client(base_url: str, api_key: str, timeout: float) -> Any:
    try:
        import openai
    except ImportError as exc:
        raise BackendError(
            "the HTTP backend needs the openai package: pip install 'phaseaware[openai]'"
        ) from exc
    return openai.OpenAI(base_url=base_url, api_key=api_key, timeout=timeout, max_retries=0)
