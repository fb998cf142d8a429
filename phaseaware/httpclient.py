"""THE HTTP client of every command that talks to a server: one deadline per attempt, one
size cap per response.

httpx's ``timeout`` bounds each socket operation, so a server that sends one byte per
second never trips it; a 300 MB answer is read whole into memory. :func:`make_http_client`
gives the ``openai`` client an ``httpx.Client`` whose transport keeps two rules:

* **Deadline:** an attempt (connect, TLS, request, response head and body, to the last
  byte) ends within ``timeout`` seconds: every socket read and write waits at most the
  time left (``httpx.ReadTimeout`` after that, which the ``openai`` client reports as a
  timeout and retries like one). Each retry is a new attempt with its own deadline.
* **Size cap:** a response whose ``Content-Length`` or body passes ``max_response_bytes``
  is dropped as it arrives (:class:`ResponseTooLarge`; the ``openai`` client wraps it in
  ``APIConnectionError``, whose ``__cause__`` :func:`transport_problem` reads).

The deadline reaches the sockets through httpcore's public network-backend interface,
installed on the transport's connection pool (``_pool._network_backend``: httpx has no
public hook for it). Where a future httpx lacks that attribute, reads are still bounded
by the per-operation timeout and the body by the deadline.

``httpx`` comes with the ``openai`` extra; it is imported when a client is made.
"""

from __future__ import annotations

import contextlib
import socket
import threading
import time
from collections.abc import Callable, Iterator
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    import openai

__all__ = [
    "DEFAULT_MAX_RESPONSE_BYTES",
    "ResponseTooLarge",
    "CONNECT_CHECK_SECONDS",
    "START_A_SERVER",
    "failure_message",
    "unreachable",
    "make_http_client",
    "openai_client",
    "transport_problem",
]

#: Largest response body read from a server (bytes); an OpenAI answer is a few KB.
DEFAULT_MAX_RESPONSE_BYTES = 16 * 1024 * 1024

_local = threading.local()  # .deadline: time.monotonic() seconds of the attempt running here


class ResponseTooLarge(Exception):
    """A server's response passed the size cap (raised inside the HTTP client)."""

    def __init__(self, limit: int) -> None:
        super().__init__(f"the response is larger than {limit} bytes")
        self.limit = limit


@contextlib.contextmanager
def _deadline(deadline: float) -> Iterator[None]:
    previous = getattr(_local, "deadline", None)
    _local.deadline = deadline if previous is None else min(previous, deadline)
    try:
        yield
    finally:
        _local.deadline = previous


def _left(timeout: float | None) -> float | None:
    """``timeout`` shortened to the time left of this thread's attempt."""
    deadline: float | None = getattr(_local, "deadline", None)
    if deadline is None:
        return timeout
    left = deadline - time.monotonic()
    if left <= 0:
        import httpcore

        raise httpcore.ReadTimeout("the attempt's deadline passed")
    return left if timeout is None else min(timeout, left)


def _deadline_backend(inner: Any) -> Any:
    """An httpcore network backend whose streams wait at most the attempt's time left."""
    import httpcore

    class Stream(httpcore.NetworkStream):
        def __init__(self, stream: Any) -> None:
            self._stream = stream

        def read(self, max_bytes: int, timeout: float | None = None) -> bytes:
            return bytes(self._stream.read(max_bytes, _left(timeout)))

        def write(self, buffer: bytes, timeout: float | None = None) -> None:
            self._stream.write(buffer, _left(timeout))

        def close(self) -> None:
            self._stream.close()

        def start_tls(
            self, ssl_context: Any, server_hostname: str | None = None, timeout: float | None = None
        ) -> Stream:
            return Stream(self._stream.start_tls(ssl_context, server_hostname, _left(timeout)))

        def get_extra_info(self, info: str) -> Any:
            return self._stream.get_extra_info(info)

    class Backend(httpcore.NetworkBackend):
        def connect_tcp(
            self,
            host: str,
            port: int,
            timeout: float | None = None,
            local_address: str | None = None,
            socket_options: Any = None,
        ) -> Stream:
            stream = inner.connect_tcp(host, port, _left(timeout), local_address, socket_options)
            return Stream(stream)

        def connect_unix_socket(
            self, path: str, timeout: float | None = None, socket_options: Any = None
        ) -> Stream:
            return Stream(inner.connect_unix_socket(path, _left(timeout), socket_options))

        def sleep(self, seconds: float) -> None:
            inner.sleep(seconds)

    return Backend()


def _transport(timeout: float, max_response_bytes: int) -> Any:
    import httpx

    class CappedStream(httpx.SyncByteStream):
        def __init__(self, stream: Any, deadline: float) -> None:
            self._stream = stream
            self._deadline = deadline

        def __iter__(self) -> Iterator[bytes]:
            total = 0
            chunks = iter(self._stream)
            while True:
                with _deadline(self._deadline):
                    chunk = next(chunks, None)
                if chunk is None:
                    return
                total += len(chunk)
                if total > max_response_bytes:
                    raise ResponseTooLarge(max_response_bytes)
                if time.monotonic() > self._deadline:
                    raise httpx.ReadTimeout("the attempt's deadline passed")
                yield chunk

        def close(self) -> None:
            self._stream.close()

    class DeadlineTransport(httpx.HTTPTransport):
        def __init__(self) -> None:
            super().__init__()
            pool = getattr(self, "_pool", None)
            inner = getattr(pool, "_network_backend", None)
            if pool is not None and inner is not None:
                pool._network_backend = _deadline_backend(inner)

        def handle_request(self, request: httpx.Request) -> httpx.Response:
            deadline = time.monotonic() + timeout
            with _deadline(deadline):
                response = super().handle_request(request)
            declared = response.headers.get("content-length", "")
            if declared.isdigit() and int(declared) > max_response_bytes:
                response.close()
                raise ResponseTooLarge(max_response_bytes)
            stream = response.stream
            assert isinstance(stream, httpx.SyncByteStream)
            return httpx.Response(
                status_code=response.status_code,
                headers=response.headers,
                stream=CappedStream(stream, deadline),
                extensions=response.extensions,
            )

    return DeadlineTransport()


def make_http_client(
    *,
    timeout: float,
    max_response_bytes: int = DEFAULT_MAX_RESPONSE_BYTES,
    on_request: Callable[[Any], None] | None = None,
) -> Any:
    """An ``httpx.Client`` (``openai.DefaultHttpxClient``) whose every attempt ends within
    ``timeout`` seconds and reads at most ``max_response_bytes`` of response body.

    ``on_request``: an httpx request event hook (called once per attempt)."""
    import openai

    hooks = {"request": [on_request]} if on_request is not None else {}
    return openai.DefaultHttpxClient(
        transport=_transport(timeout, max_response_bytes), timeout=timeout, event_hooks=hooks
    )


def openai_client(
    base_url: str,
    *,
    api_key: str,
    timeout: float,
    max_retries: int,
    on_request: Callable[[Any], None] | None = None,
) -> openai.OpenAI:
    """An ``openai.OpenAI`` client over :func:`make_http_client` (``timeout`` per attempt)."""
    import httpx
    import openai

    from phaseaware.errors import InputError
    from phaseaware.redact import redact_url

    http = make_http_client(timeout=timeout, on_request=on_request)
    try:
        return openai.OpenAI(
            base_url=base_url, api_key=api_key, timeout=timeout, max_retries=max_retries,
            http_client=http,
        )  # fmt: skip
    except (httpx.InvalidURL, ValueError) as exc:  # a bad port, an unclosed [IPv6 host]
        http.close()
        raise InputError(
            f"invalid server URL {redact_url(base_url)} ({exc}); check --base-url "
            "(e.g. http://127.0.0.1:8000/v1)"
        ) from None


def transport_problem(exc: BaseException) -> str | None:
    """What went wrong in an ``openai`` error caused by these rules (deadline passed,
    response too large), as a clause for a message; ``None`` for any other error."""
    seen: set[int] = set()
    cause: BaseException | None = exc
    while cause is not None and id(cause) not in seen:
        seen.add(id(cause))
        if isinstance(cause, ResponseTooLarge):
            return (
                f"the server sent a response larger than {cause.limit} bytes (an answer is a "
                "few KB): check --base-url points at an OpenAI-compatible server"
            )
        cause = cause.__cause__ or cause.__context__
    return None


def failure_message(exc: BaseException, url: str) -> str:
    """The message for an ``openai`` request that got no usable answer from ``url`` (a
    redacted URL): too large, past the deadline, or no server there."""
    import openai

    problem = transport_problem(exc)
    if problem is not None:
        return f"{url}: {problem}"
    if isinstance(exc, openai.APITimeoutError):
        return f"{url} did not answer within --timeout: raise --timeout or check the server"
    return f"cannot reach the server at {url} ({type(exc).__name__}): {START_A_SERVER}"


#: Seconds a server has to accept a TCP connection before a command gives up on it.
CONNECT_CHECK_SECONDS = 3.0
#: How to start a server, for a message about one that is not there.
START_A_SERVER = (
    "start the server first (the reference model: `phaseaware serve-reference --port 8000`, "
    "then --base-url http://127.0.0.1:8000/v1) or fix --base-url"
)


def unreachable(base_url: str, *, timeout: float = CONNECT_CHECK_SECONDS) -> str | None:
    """Why nothing accepts a TCP connection at ``base_url``'s host and port (refused, no
    such host, no answer within ``timeout`` seconds), else ``None``. One connect, before a
    command's work: the client would retry a refused connection for half a minute."""
    from urllib.parse import urlsplit

    parts = urlsplit(base_url.strip())
    try:
        port = parts.port or (443 if parts.scheme == "https" else 80)
    except ValueError:
        return None  # a malformed port: the client's own error names it
    if not parts.hostname:
        return None
    try:
        with socket.create_connection((parts.hostname, port), timeout=timeout):
            return None
    except TimeoutError:
        return f"no answer within {timeout:g} s"
    except ConnectionRefusedError:
        return "connection refused"
    except socket.gaierror:
        return f"no such host {parts.hostname!r}"
    except OSError as exc:
        return exc.strerror or type(exc).__name__
