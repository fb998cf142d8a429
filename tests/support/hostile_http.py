"""A hostile HTTP server on loopback (tests only): it answers every request the same bad way.

``start_hostile(mode)`` serves on ``127.0.0.1`` (a free port) in a background thread, one
thread per connection; each request is read (head and ``Content-Length`` body), then:

* ``"trickle-head"``: the response head, one byte every ``interval`` seconds, never ending;
* ``"trickle-body"``: a complete head announcing 10,000 bytes, then the body one byte per
  ``interval``;
* ``"huge"``: a head with no length, then ``size`` bytes of a JSON string as fast as the
  socket takes them (``Connection: close``);
* ``"huge-declared"``: the same, with ``Content-Length: size``;
* ``"json"``: ``body`` (bytes, or a function returning them, called per request) as a
  200 ``application/json`` answer.

``server.requests`` counts the requests read. The server stops (and every connection
closes) when the ``with`` block ends.
"""

from __future__ import annotations

import contextlib
import socket
import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field

__all__ = ["HostileServer", "start_hostile"]


@dataclass
class HostileServer:
    host: str
    port: int
    requests: int = 0
    stop: threading.Event = field(default_factory=threading.Event)

    @property
    def base_url(self) -> str:
        return f"http://{self.host}:{self.port}/v1"


def _read_request(conn: socket.socket) -> bool:
    data = b""
    while b"\r\n\r\n" not in data:
        chunk = conn.recv(65536)
        if not chunk:
            return False
        data += chunk
    head, _, body = data.partition(b"\r\n\r\n")
    length = 0
    for line in head.split(b"\r\n")[1:]:
        name, _, value = line.partition(b":")
        if name.strip().lower() == b"content-length":
            length = int(value.strip())
    while len(body) < length:
        chunk = conn.recv(65536)
        if not chunk:
            return False
        body += chunk
    return True


def _answer(conn: socket.socket, server: HostileServer, mode: str, opts: dict) -> None:
    interval, size = opts["interval"], opts["size"]
    if mode == "trickle-head":
        for byte in b"HTTP/1.1 200 OK\r\n" + b"X-Slow: " + b"a" * 100_000:
            if server.stop.wait(interval):
                return
            conn.sendall(bytes([byte]))
    elif mode == "trickle-body":
        conn.sendall(
            b"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: 10000\r\n\r\n"
        )
        for _ in range(10_000):
            if server.stop.wait(interval):
                return
            conn.sendall(b" ")
    elif mode in ("huge", "huge-declared"):
        length = f"Content-Length: {size + 2}\r\n" if mode == "huge-declared" else ""
        conn.sendall(
            f"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\n{length}"
            'Connection: close\r\n\r\n"'.encode()
        )
        block = b"x" * (1 << 20)
        sent = 0
        while sent < size and not server.stop.is_set():
            conn.sendall(block[: size - sent])
            sent += min(len(block), size - sent)
        conn.sendall(b'"')
    elif mode == "json":
        body = opts["body"]() if callable(opts["body"]) else opts["body"]
        conn.sendall(
            b"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: "
            + str(len(body)).encode() + b"\r\n\r\n" + body
        )  # fmt: skip
    else:
        raise ValueError(mode)


@contextlib.contextmanager
def start_hostile(
    mode: str,
    *,
    interval: float = 1.0,
    size: int = 300 * 1024 * 1024,
    body: bytes | Callable[[], bytes] = b"{}",
) -> Iterator[HostileServer]:
    listener = socket.create_server(("127.0.0.1", 0))
    listener.settimeout(0.1)
    server = HostileServer("127.0.0.1", listener.getsockname()[1])
    opts = {"interval": interval, "size": size, "body": body}
    threads: list[threading.Thread] = []

    def handle(conn: socket.socket) -> None:
        with conn:
            try:
                while not server.stop.is_set() and _read_request(conn):
                    server.requests += 1
                    _answer(conn, server, mode, opts)
                    if mode != "json":
                        return
            except OSError:
                return

    def accept() -> None:
        while not server.stop.is_set():
            try:
                conn, _ = listener.accept()
            except TimeoutError:
                continue
            except OSError:
                return
            thread = threading.Thread(target=handle, args=(conn,), daemon=True)
            thread.start()
            threads.append(thread)

    acceptor = threading.Thread(target=accept, daemon=True)
    acceptor.start()
    try:
        yield server
    finally:
        server.stop.set()
        acceptor.join(timeout=5)
        listener.close()
        deadline = time.monotonic() + 5
        for thread in threads:
            thread.join(timeout=max(0.0, deadline - time.monotonic()))
