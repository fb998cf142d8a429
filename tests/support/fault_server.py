"""The production ASGI app behind a fault-injecting, request-logging middleware (tests only).

:func:`start_server` serves an engine exactly as ``serve-reference`` does (the same
:class:`~phaseaware.reference.server.OpenAIApp` on uvicorn, in a background thread, on
``127.0.0.1`` port 0 by default) with two test hooks in front of it:

* ``faults`` is called once per request, before anything else (authentication included),
  with a :class:`RequestInfo`; it may return a :class:`Fault` to delay the request and/or
  answer it with a fixed status, body and headers (429 with ``Retry-After``, 5xx, a delay
  longer than the client's timeout, ...).
* every request is appended to :attr:`FaultServer.request_log` (method, path, parsed body,
  status; the latest ``request_log_limit``) before its answer is sent, so a client that has
  its answer can rely on the log.

To hand the body to a hook, the middleware then reads it first (under the app's own limits,
but before authentication) and replays it to the app; without a hook the app reads the body
itself, in its own order (authentication first), and the log keeps a copy.
"""

from __future__ import annotations

import asyncio
import itertools
import socket
import threading
import time
from collections import deque
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

from phaseaware.reference.engine import ServerEngine
from phaseaware.reference.openai_protocol import RequestError, decode_json_body, error_body
from phaseaware.reference.server import (
    ClientDisconnected,
    Message,
    OpenAIApp,
    Receive,
    RunningServer,
    Scope,
    Send,
    ServerLimits,
    bind_socket,
    read_body,
    send_json,
)

__all__ = ["Fault", "FaultServer", "LoggedRequest", "RequestInfo", "start_server"]

CLIENT_CLOSED = 499  # logged status of a request whose client went away mid-read


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


class _FaultsAndLog:
    """ASGI middleware: fault hook, then the app; logs every request before its answer."""

    def __init__(self, app: OpenAIApp, faults: FaultHook | None, log_limit: int | None) -> None:
        self.app = app
        self.faults = faults
        self.lock = threading.Lock()
        self.counter = itertools.count()
        self.log: deque[LoggedRequest] = deque(maxlen=log_limit)
        self.handled = 0
        self.in_flight = 0
        self.max_in_flight = 0

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        query = scope["query_string"].decode("latin-1")
        pending = _Pending(
            index=-1,
            method=str(scope["method"]),
            path=str(scope["path"]) + (f"?{query}" if query else ""),
            started=time.monotonic(),
        )
        with self.lock:
            pending.index = next(self.counter)
            self.in_flight += 1
            self.max_in_flight = max(self.max_in_flight, self.in_flight)

        async def logged_send(message: Message) -> None:
            if message["type"] == "http.response.start":
                self._record(pending, int(message["status"]))
            await send(message)

        try:
            await self._serve(scope, receive, logged_send, pending)
        finally:
            self._record(pending, CLIENT_CLOSED)  # no-op once answered

    def _tee(self, receive: Receive, pending: _Pending) -> Receive:
        """``receive``, keeping what the app reads as the logged body."""
        chunks: list[bytes] = []

        async def tee() -> Message:
            message = await receive()
            if message["type"] == "http.request":
                chunks.append(bytes(message.get("body", b"")))
                if not message.get("more_body", False):
                    pending.body = self._parsed(b"".join(chunks))
            return message

        return tee

    def _parsed(self, raw: bytes) -> Mapping[str, Any] | None:
        try:
            return decode_json_body(raw, max_depth=self.app.limits.max_json_depth)
        except RequestError:
            return None

    def _record(self, pending: _Pending, status: int) -> None:
        if pending.logged:
            return
        pending.logged = True
        entry = LoggedRequest(
            pending.index,
            pending.method,
            pending.path,
            pending.body,
            status,
            pending.started,
            time.monotonic(),
        )
        with self.lock:
            self.in_flight -= 1
            self.handled += 1
            self.log.append(entry)

    async def _serve(self, scope: Scope, receive: Receive, send: Send, pending: _Pending) -> None:
        if self.faults is None:  # the app reads the body itself (after authentication)
            await self.app(scope, self._tee(receive, pending), send)
            return
        try:
            raw = await read_body(receive, dict(scope["headers"]), self.app.limits)
        except RequestError as exc:
            await send_json(send, exc.status, exc.to_body(), {"connection": "close"})
            return
        except ClientDisconnected:
            return
        pending.body = self._parsed(raw)
        info = RequestInfo(pending.index, pending.method, pending.path, pending.body)
        try:
            fault = self.faults(info) if self.faults is not None else None
        except Exception as exc:  # a failing fault hook: answer 500
            payload = error_body(500, f"server error: {type(exc).__name__}", type_="server_error")
            await send_json(send, 500, payload)
            return
        if fault is not None:
            if fault.delay_s > 0:
                await asyncio.sleep(fault.delay_s)
            if fault.status is not None:
                await send_json(send, fault.status, dict(fault.body or {}), dict(fault.headers))
                return
        await self.app(scope, _replay(raw, receive), send)


@dataclass
class _Pending:
    """A request being served, until it is logged."""

    index: int
    method: str
    path: str
    started: float
    body: Mapping[str, Any] | None = None
    logged: bool = False


def _replay(raw: bytes, receive: Receive) -> Receive:
    """A ``receive`` that yields the already-read body once, then the client's own events."""
    sent = False

    async def replay() -> Message:
        nonlocal sent
        if not sent:
            sent = True
            return {"type": "http.request", "body": raw, "more_body": False}
        return await receive()

    return replay


class FaultServer(RunningServer):
    """A :class:`RunningServer` with the request log of its fault middleware."""

    def __init__(self, app: _FaultsAndLog, sock: socket.socket, limits: ServerLimits) -> None:
        self._state = app
        self._engine_name = app.app.engine.model_name
        super().__init__(app, sock, limits)

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

    def __enter__(self) -> FaultServer:
        return self

    def __repr__(self) -> str:
        return f"FaultServer(base_url={self.base_url!r}, model={self._engine_name!r})"


def start_server(
    engine: ServerEngine,
    *,
    host: str = "127.0.0.1",
    port: int = 0,
    api_key: str | None = None,
    faults: FaultHook | None = None,
    engine_parallelism: int | None = 1,
    request_log_limit: int | None = 1000,
    limits: ServerLimits | None = None,
) -> FaultServer:
    """Serve ``engine`` on ``host:port`` (port 0 picks a free port) in a thread.

    ``api_key``: when set, requests must carry ``Authorization: Bearer <key>``
    (401 otherwise); ``None`` disables the check. ``engine_parallelism``: most
    concurrent ``generate`` calls (``None`` = unlimited; 1 for engines that
    are not thread-safe). ``request_log_limit``: how many of the latest
    requests (with their bodies) the request log keeps (``None``: all, 0: none).
    """
    app = OpenAIApp(engine, api_key=api_key, limits=limits, engine_parallelism=engine_parallelism)
    wrapped = _FaultsAndLog(app, faults, request_log_limit)
    sock = bind_socket(host, port, backlog=app.limits.backlog)
    return FaultServer(wrapped, sock, app.limits)
