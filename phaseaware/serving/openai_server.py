"""A small OpenAI-compatible HTTP server on the standard library.

Serves ``GET /v1/models``, ``POST /v1/chat/completions`` and
``POST /v1/completions`` for one model, driven by a :class:`ServerEngine`
(the model: chat template, token counting, greedy generation). It exists so
that calibration over HTTP can be exercised end to end against the shipped
reference model (``phaseaware serve-reference``) and against simulated
engines in tests; it is not a production server (no streaming, ``n == 1``).

Responses follow the OpenAI shapes (``id``, ``object``, ``created``,
``model``, ``choices``, ``usage``). Malformed requests get HTTP 400 with
``{"error": {"message", "type": "invalid_request_error", "param", "code"}}``;
an unknown model gets 404 ``model_not_found``; a prompt longer than the
engine's ``max_context_tokens`` gets 400 ``context_length_exceeded``.

Test hooks: ``faults`` is called once per request, before anything else,
with a :class:`RequestInfo`; it may return a :class:`Fault` to delay the
request and/or answer it with a fixed status and body. Every request is
appended to :attr:`RunningServer.request_log` (method, path, parsed body,
status; the latest ``request_log_limit``), so tests can count what reached
the server and in which order.
"""

from __future__ import annotations

import hmac
import itertools
import json
import threading
import time
from collections import deque
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from http import HTTPStatus
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any, Protocol, runtime_checkable

from phaseaware.serving.requests import (
    CompletionParams,
    GenerationResult,
    RequestError,
    completion_body,
    error_body,
    parse_chat_request,
    parse_completion_request,
    parse_json_object,
)

__all__ = [
    "GenerationResult",
    "ServerEngine",
    "RequestInfo",
    "Fault",
    "LoggedRequest",
    "RunningServer",
    "start_server",
]

_MAX_BODY_BYTES = 64 * 1024 * 1024


@runtime_checkable
class ServerEngine(Protocol):
    """What the server needs from a model.

    ``render_chat`` applies the chat template and returns the full prompt text
    (BOS included) that ``count_tokens`` and ``generate`` take. Engines may
    set ``max_context_tokens`` (int) to have over-long prompts rejected.
    The server calls ``generate`` from several threads unless started with
    ``engine_parallelism=1`` (the default), which serializes calls.
    """

    model_name: str

    def render_chat(self, messages: Sequence[Mapping[str, str]]) -> str: ...

    def count_tokens(self, prompt: str) -> int: ...

    def generate(
        self, prompt: str, *, max_tokens: int, temperature: float, stop: tuple[str, ...]
    ) -> GenerationResult: ...


@dataclass(frozen=True)
class RequestInfo:
    """What a fault hook sees: ``index`` counts requests from 0 in arrival order."""

    index: int
    method: str
    path: str
    body: Mapping[str, Any] | None


@dataclass(frozen=True)
class Fault:
    """Returned by a fault hook: wait ``delay_s`` seconds, then (if ``status``
    is set) answer with ``status`` and JSON ``body`` instead of serving."""

    delay_s: float = 0.0
    status: int | None = None
    body: Mapping[str, Any] | None = None
    headers: Mapping[str, str] = field(default_factory=dict)


FaultHook = Callable[[RequestInfo], "Fault | None"]


@dataclass(frozen=True)
class LoggedRequest:
    """One request as the server saw it; ``body`` is ``None`` when not JSON.
    ``started``/``finished`` are ``time.monotonic()`` seconds."""

    index: int
    method: str
    path: str
    body: Mapping[str, Any] | None
    status: int
    started: float
    finished: float


class _State:
    """Shared, lock-protected server state (log, counters, engine gate)."""

    def __init__(
        self,
        engine: ServerEngine,
        api_key: str | None,
        faults: FaultHook | None,
        engine_parallelism: int | None,
        request_log_limit: int | None,
    ) -> None:
        self.engine = engine
        self.api_key = api_key
        self.faults = faults
        self.gate = threading.BoundedSemaphore(engine_parallelism) if engine_parallelism else None
        self.lock = threading.Lock()
        self.counter = itertools.count()
        self.log: deque[LoggedRequest] = deque(maxlen=request_log_limit)
        self.handled = 0
        self.in_flight = 0
        self.max_in_flight = 0
        self.created = int(time.time())


class RunningServer:
    """A server running in a background thread; use as a context manager."""

    def __init__(self, httpd: ThreadingHTTPServer, state: _State) -> None:
        self._httpd = httpd
        self._state = state
        self._thread = threading.Thread(
            target=httpd.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True
        )
        self._thread.start()
        self._closed = False

    @property
    def host(self) -> str:
        return str(self._httpd.server_address[0])

    @property
    def port(self) -> int:
        """The bound port (the real one when started with ``port=0``)."""
        return int(self._httpd.server_address[1])

    @property
    def base_url(self) -> str:
        """``http://host:port/v1``: what OpenAI clients take as ``base_url``."""
        return f"http://{self.host}:{self.port}/v1"

    @property
    def request_log(self) -> list[LoggedRequest]:
        """A copy of the logged requests (the latest ``request_log_limit``) in arrival order.

        A request the client abandoned (timeout) is logged with the status the
        server meant to send."""
        with self._state.lock:
            return sorted(self._state.log, key=lambda r: r.index)

    @property
    def requests_handled(self) -> int:
        """Requests answered (or abandoned by the client) so far, logged or not."""
        with self._state.lock:
            return self._state.handled

    @property
    def in_flight(self) -> int:
        """Requests being handled right now (read but not yet logged)."""
        with self._state.lock:
            return self._state.in_flight

    @property
    def max_in_flight(self) -> int:
        """Most requests the server was handling at the same time."""
        with self._state.lock:
            return self._state.max_in_flight

    def close(self) -> None:
        """Stop serving and release the port (idempotent)."""
        if self._closed:
            return
        self._closed = True
        self._httpd.shutdown()
        self._httpd.server_close()
        self._thread.join(timeout=5)

    def __enter__(self) -> RunningServer:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def __repr__(self) -> str:
        return f"RunningServer(base_url={self.base_url!r}, model={self._state.engine.model_name!r})"


def start_server(
    engine: ServerEngine,
    *,
    host: str = "127.0.0.1",
    port: int = 0,
    api_key: str | None = None,
    faults: FaultHook | None = None,
    engine_parallelism: int | None = 1,
    request_log_limit: int | None = 1000,
) -> RunningServer:
    """Serve ``engine`` on ``host:port`` (port 0 picks a free port) in a thread.

    ``api_key``: when set, requests must carry ``Authorization: Bearer <key>``
    (401 otherwise); ``None`` disables the check. ``engine_parallelism``: most
    concurrent ``generate`` calls (``None`` = unlimited; 1 for engines that
    are not thread-safe). ``request_log_limit``: how many of the latest
    requests (with their bodies) the request log keeps (``None``: all, 0: none).
    """
    if engine_parallelism is not None and engine_parallelism < 1:
        raise ValueError(f"engine_parallelism must be >= 1 or None, got {engine_parallelism}")
    state = _State(engine, api_key, faults, engine_parallelism, request_log_limit)

    class Handler(_Handler):
        pass

    Handler.state = state
    httpd = ThreadingHTTPServer((host, port), Handler)
    httpd.daemon_threads = True
    return RunningServer(httpd, state)


class _Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    server_version = "phaseaware-openai/1"
    state: _State

    def log_message(self, format: str, *args: object) -> None:  # noqa: A002
        """Silence the default stderr access log (the request log records requests)."""

    def do_GET(self) -> None:  # noqa: N802
        self._serve("GET")

    def do_POST(self) -> None:  # noqa: N802
        self._serve("POST")

    def _serve(self, method: str) -> None:
        state = self.state
        started = time.monotonic()
        with state.lock:
            index = next(state.counter)
            state.in_flight += 1
            state.max_in_flight = max(state.max_in_flight, state.in_flight)
        body: Mapping[str, Any] | None = None
        status, payload, headers = 500, error_body(500, "internal error", type_="server_error"), {}
        try:
            raw = self._read_body() if method == "POST" else b""
            body = parse_json_object(raw)
            status, payload, headers = self._respond_to(index, method, raw, body)
        except Exception as exc:  # a failing fault hook or a broken read: answer 500
            payload = error_body(500, f"server error: {type(exc).__name__}", type_="server_error")
        finally:
            # Log before answering: a client that has its answer can rely on the log.
            with state.lock:
                state.in_flight -= 1
                state.handled += 1
                state.log.append(
                    LoggedRequest(index, method, self.path, body, status, started, time.monotonic())
                )
        try:
            self._send_json(status, payload, headers)
        except ConnectionError:
            self.close_connection = True  # the client gave up (timeout): nothing to answer

    def _respond_to(
        self, index: int, method: str, raw: bytes, body: Mapping[str, Any] | None
    ) -> tuple[int, Mapping[str, Any], Mapping[str, str]]:
        state = self.state
        if state.faults is not None:
            fault = state.faults(RequestInfo(index, method, self.path, body))
            if fault is not None:
                if fault.delay_s > 0:
                    time.sleep(fault.delay_s)
                if fault.status is not None:
                    return fault.status, dict(fault.body or {}), fault.headers
        if state.api_key is not None and not self._authorized(state.api_key):
            message = "Incorrect API key provided (send it as 'Authorization: Bearer <key>')."
            return (
                401,
                error_body(
                    401, message, type_="invalid_request_error", param=None, code="invalid_api_key"
                ),
                {},
            )
        try:
            status, payload = self._route(method, raw, body)
        except RequestError as exc:
            status, payload = (
                exc.status,
                error_body(
                    exc.status,
                    exc.message,
                    type_="invalid_request_error",
                    param=exc.param,
                    code=exc.code,
                ),
            )
        except Exception as exc:  # the engine failed: report it, keep serving
            status = 500
            payload = error_body(
                500, f"engine error: {exc}", type_="server_error", param=None, code=None
            )
        return status, payload, {}

    def _route(
        self, method: str, raw: bytes, body: Mapping[str, Any] | None
    ) -> tuple[int, Mapping[str, Any]]:
        path = self.path.split("?", 1)[0].rstrip("/")
        routes = {
            "/v1/models": ("GET", None),
            "/v1/chat/completions": ("POST", parse_chat_request),
            "/v1/completions": ("POST", parse_completion_request),
        }
        if path not in routes:
            raise RequestError(404, f"Unknown URL: {method} {path}", param=None, code="unknown_url")
        want, parse = routes[path]
        if method != want:
            raise RequestError(405, f"{path} takes {want}, not {method}", param=None, code=None)
        if parse is None:
            return 200, self._models()
        if body is None:
            detail = "empty body" if not raw else "body is not a JSON object"
            raise RequestError(400, f"Invalid JSON in request: {detail}", param=None, code=None)
        params = parse(body, model_name=self.state.engine.model_name)
        return 200, self._complete(params)

    def _models(self) -> Mapping[str, Any]:
        engine = self.state.engine
        entry = {
            "id": engine.model_name,
            "object": "model",
            "created": self.state.created,
            "owned_by": "phaseaware",
        }
        return {"object": "list", "data": [entry]}

    def _complete(self, params: CompletionParams) -> Mapping[str, Any]:
        engine = self.state.engine
        prompt = params.prompt if params.messages is None else engine.render_chat(params.messages)
        prompt_tokens = int(engine.count_tokens(prompt))
        limit = getattr(engine, "max_context_tokens", None)
        if limit is not None and prompt_tokens + params.max_tokens > int(limit):
            raise RequestError(
                400,
                f"This model's maximum context length is {limit} tokens. However, you requested "
                f"{prompt_tokens + params.max_tokens} tokens ({prompt_tokens} in the messages, "
                f"{params.max_tokens} in the completion).",
                param="messages" if params.messages is not None else "prompt",
                code="context_length_exceeded",
            )
        gate = self.state.gate
        if gate is not None:
            gate.acquire()
        try:
            result = engine.generate(
                prompt,
                max_tokens=params.max_tokens,
                temperature=params.temperature,
                stop=params.stop,
            )
        finally:
            if gate is not None:
                gate.release()
        return completion_body(params, result, prompt_tokens, self.state.created)

    def _authorized(self, api_key: str) -> bool:
        header = self.headers.get("Authorization", "")
        scheme, _, token = header.partition(" ")
        return scheme.lower() == "bearer" and hmac.compare_digest(
            token.strip().encode(), api_key.encode()
        )

    def _read_body(self) -> bytes:
        length = self.headers.get("Content-Length")
        if length is None or not length.isdigit():
            self.close_connection = True
            return b""
        size = int(length)
        if size > _MAX_BODY_BYTES:
            self.close_connection = True
            return b""
        return self.rfile.read(size)

    def _send_json(
        self, status: int, payload: Mapping[str, Any], headers: Mapping[str, str]
    ) -> None:
        data = json.dumps(payload).encode("utf-8")
        try:
            reason = HTTPStatus(status).phrase
        except ValueError:
            reason = "Status"
        self.send_response(status, reason)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        for name, value in headers.items():
            self.send_header(name, value)
        self.end_headers()
        self.wfile.write(data)
        self.wfile.flush()
