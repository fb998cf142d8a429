"""uvicorn glue: a listening socket, a head deadline, and serving in or off the main thread.

Kept apart from the ASGI application (:mod:`phaseaware.reference.server`) so that either can
be read alone: this module knows sockets, uvicorn and threads, nothing about OpenAI.
uvicorn (h11) parses HTTP, keeps connections alive for ``keep_alive_s`` and queues bursts in
a ``backlog`` of 2048; :class:`_DeadlineH11Protocol` adds the one timeout it lacks (a
request head must arrive within ``head_timeout_s``). Logging is left to the application:
``log_config=None``, no access log.
"""

from __future__ import annotations

import asyncio
import socket
import threading
import time
from collections.abc import Awaitable, Callable, MutableMapping
from dataclasses import dataclass
from typing import Any

import uvicorn
from uvicorn.protocols.http.h11_impl import H11Protocol

__all__ = [
    "ASGIApp",
    "Message",
    "Receive",
    "RunningServer",
    "Scope",
    "Send",
    "ServerLimits",
    "bind_socket",
    "serve",
    "start_app",
]

Scope = MutableMapping[str, Any]
Message = MutableMapping[str, Any]
Receive = Callable[[], Awaitable[Message]]
Send = Callable[[Message], Awaitable[None]]
ASGIApp = Callable[[Scope, Receive, Send], Awaitable[None]]


@dataclass(frozen=True)
class ServerLimits:
    """Bounds on what one client can make the server do (bytes, seconds, rows).

    ``max_json_items`` (values in the body, counted before decoding), ``max_messages`` and
    ``max_prompt_chars`` (message contents together, or the raw prompt) bound the work one
    request can ask for before any decoding or tokenizing (400 above them). A body over
    ``large_body_bytes`` is decoded off the event loop, one at a time, and holds its bytes
    of ``max_large_body_bytes`` (all large bodies in flight together) while it is served
    (429 with ``Retry-After`` when they are spent), and large bodies are paced to
    ``large_body_bytes_per_s`` on average (bursts of two ``max_body_bytes``): a client
    sending them back to back waits instead of taking the CPU from small requests. A body
    of more than ``large_body_values`` JSON values (brackets and commas) is heavy too:
    paced by its values' cost and decoded off the event loop.
    ``shutdown_grace_s``: how long SIGTERM waits for requests in flight."""

    max_body_bytes: int = 8 * 1024 * 1024
    large_body_bytes: int = 256 * 1024
    max_large_body_bytes: int = 64 * 1024 * 1024
    large_body_bytes_per_s: int = 16 * 1024 * 1024
    large_body_values: int = 2048
    max_json_items: int = 16 * 1024
    max_messages: int = 1024
    max_prompt_chars: int = 256 * 1024
    max_json_depth: int = 32
    head_timeout_s: float = 10.0
    body_timeout_s: float = 30.0
    keep_alive_s: int = 5
    backlog: int = 2048
    max_batch: int = 32
    batch_window_s: float = 0.003
    shutdown_grace_s: int = 2


class _DeadlineH11Protocol(H11Protocol):
    """uvicorn's h11 protocol plus a deadline for each request head.

    uvicorn arms its keep-alive timer only after an answer, and any byte cancels it, so a
    connection that never sends (or trickles) a request head would stay open for ever.
    """

    head_timeout_s: float = ServerLimits.head_timeout_s

    def connection_made(self, transport: asyncio.Transport) -> None:  # type: ignore[override]
        super().connection_made(transport)
        self._head_timer = self.loop.call_later(self.head_timeout_s, self._head_deadline)

    def on_response_complete(self) -> None:
        super().on_response_complete()
        self._head_timer.cancel()
        self._head_timer = self.loop.call_later(self.head_timeout_s, self._head_deadline)

    def connection_lost(self, exc: Exception | None) -> None:
        self._head_timer.cancel()
        super().connection_lost(exc)

    def _head_deadline(self) -> None:
        waiting = self.cycle is None or self.cycle.response_complete
        if waiting and not self.transport.is_closing():
            self.transport.close()


def bind_socket(host: str, port: int, *, backlog: int = ServerLimits.backlog) -> socket.socket:
    """A listening TCP socket on ``host:port`` (0: a free port); raises ``OSError``."""
    if not 0 <= port <= 65535:
        raise OSError(f"port must be in 0..65535, got {port}")
    family, kind, proto, _, address = socket.getaddrinfo(
        host, port, type=socket.SOCK_STREAM, flags=socket.AI_PASSIVE
    )[0]
    sock = socket.socket(family, kind, proto)
    try:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        sock.bind(address)
        sock.listen(backlog)  # connections queue from here on, before the loop runs
    except OSError:
        sock.close()
        raise
    return sock


def _server(app: ASGIApp, limits: ServerLimits) -> uvicorn.Server:
    protocol = type(
        "HeadDeadlineH11", (_DeadlineH11Protocol,), {"head_timeout_s": limits.head_timeout_s}
    )
    config = uvicorn.Config(
        app,
        http=protocol,
        ws="none",
        lifespan="on",
        log_config=None,
        access_log=False,
        timeout_keep_alive=limits.keep_alive_s,
        # SIGTERM: requests still running after the grace are cancelled (their engine
        # work is dropped at its next step), so the process exits promptly
        timeout_graceful_shutdown=limits.shutdown_grace_s,
        backlog=limits.backlog,
    )
    return uvicorn.Server(config)


def serve(app: ASGIApp, sock: socket.socket, limits: ServerLimits | None = None) -> None:
    """Serve ``app`` on ``sock`` in this thread until SIGINT/SIGTERM (graceful shutdown)."""
    _server(app, limits or ServerLimits()).run(sockets=[sock])


class RunningServer:
    """uvicorn serving an ASGI app in a background thread; use as a context manager."""

    def __init__(self, app: ASGIApp, sock: socket.socket, limits: ServerLimits) -> None:
        self._sock = sock
        name = sock.getsockname()
        self.host: str = str(name[0])
        self.port: int = int(name[1])  # the bound port (the real one for port 0)
        self._closed = False
        self._server = _server(app, limits)
        self._thread = threading.Thread(
            target=self._server.run, kwargs={"sockets": [sock]}, daemon=True
        )
        self._thread.start()
        deadline = time.monotonic() + 30
        while not self._server.started and self._thread.is_alive():
            if time.monotonic() > deadline:
                break
            time.sleep(0.005)
        if not self._server.started:
            self.close()
            raise OSError(f"the server on {self.host}:{self.port} did not start")

    @property
    def base_url(self) -> str:
        """``http://host:port/v1``: what OpenAI clients take as ``base_url``."""
        host = f"[{self.host}]" if ":" in self.host else self.host
        return f"http://{host}:{self.port}/v1"

    def close(self, grace_s: float = 1.0) -> None:
        """Stop serving and release the port (idempotent); requests still running after
        ``grace_s`` seconds are abandoned."""
        if self._closed:
            return
        self._closed = True
        self._server.should_exit = True
        self._thread.join(timeout=grace_s)
        self._server.force_exit = True
        self._thread.join(timeout=5)
        self._sock.close()

    def __enter__(self) -> RunningServer:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def __repr__(self) -> str:
        return f"RunningServer(base_url={self.base_url!r})"


def start_app(
    app: ASGIApp,
    *,
    host: str = "127.0.0.1",
    port: int = 0,
    limits: ServerLimits | None = None,
) -> RunningServer:
    """Serve any ASGI ``app`` on ``host:port`` in a background thread."""
    limits = limits or ServerLimits()
    return RunningServer(app, bind_socket(host, port, backlog=limits.backlog), limits)
