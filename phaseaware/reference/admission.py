"""Reading a request body, and the byte budget that keeps large bodies from crowding out
small requests.

A body of more than :attr:`ServerLimits.large_body_bytes` is *large*: its bytes are taken
from one server-wide :class:`BodyBudget` (``max_large_body_bytes``) before it is read (on
its ``Content-Length``) or as it streams (chunked), and given back when its request ends.
When the budget cannot cover a body the answer is 429 ``rate_limit_exceeded`` with
``Retry-After``, the body unread (the official ``openai`` client waits and retries). The
server decodes large bodies off the event loop, one at a time (:mod:`.server`), so small
requests keep their latency however many large ones arrive.
"""

from __future__ import annotations

import asyncio
import math
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager

from phaseaware.reference.openai_protocol import RequestError
from phaseaware.reference.uvicorn_serve import Receive, ServerLimits

__all__ = [
    "VALUE_COST_BYTES",
    "BodyBudget",
    "BodyClaim",
    "BodyPace",
    "ClientDisconnected",
    "busy_error",
    "read_body",
]

RETRY_AFTER_S = 1
MAX_WAIT_S = 5.0  # longest a heavy request waits for the pace before 429
# What one JSON value costs the server, in body bytes of the same CPU time: decoding and
# checking a value takes about 2.8 us, a body byte about 5 ns (benchmarks/server_abuse.py,
# the ``deep`` and ``max`` bodies: 42 ms for 15,000 values, 40 ms for 8 MiB)
VALUE_COST_BYTES = 512


class ClientDisconnected(Exception):
    """The client went away before its request was read; there is nobody to answer."""


class BodyBudget:
    """Bytes of large bodies the server holds at once (thread-safe)."""

    def __init__(self, total_bytes: int) -> None:
        if total_bytes < 0:
            raise ValueError(f"total_bytes must be >= 0, got {total_bytes}")
        self.total_bytes = total_bytes
        self.held_bytes = 0
        self._lock = threading.Lock()

    def take(self, n: int) -> bool:
        """Hold ``n`` more bytes if the budget has room; whether it had."""
        with self._lock:
            if self.held_bytes + n > self.total_bytes:
                return False
            self.held_bytes += n
            return True

    def give(self, n: int) -> None:
        with self._lock:
            self.held_bytes -= n

    @contextmanager
    def claim(self) -> Iterator[BodyClaim]:
        """A :class:`BodyClaim` whose bytes return to the budget when the block ends."""
        held = BodyClaim(self)
        try:
            yield held
        finally:
            self.give(held.bytes)


class BodyPace:
    """A token bucket for the bytes of large bodies: at most ``bytes_per_s`` on average,
    bursts of up to ``burst_bytes``. :meth:`delay` reserves bytes at once and says how long
    the request must wait for them, so concurrent requests queue in arrival order (their
    number bounded by the :class:`BodyBudget` they hold meanwhile)."""

    def __init__(self, bytes_per_s: float, burst_bytes: int) -> None:
        if not bytes_per_s > 0 or burst_bytes < 0:
            raise ValueError(
                f"need bytes_per_s > 0 and burst_bytes >= 0, got {bytes_per_s}, {burst_bytes}"
            )
        self.bytes_per_s = float(bytes_per_s)
        self.burst_bytes = burst_bytes
        self._level = float(burst_bytes)
        self._at = time.monotonic()
        self._lock = threading.Lock()

    def delay(self, n: int) -> float:
        """Seconds to wait before using ``n`` bytes (0.0: now); the bytes are spent."""
        with self._lock:
            now = time.monotonic()
            self._level = min(self.burst_bytes, self._level + (now - self._at) * self.bytes_per_s)
            self._at = now
            self._level -= n
            return max(0.0, -self._level / self.bytes_per_s)

    def refund(self, n: int) -> None:
        """Give back ``n`` bytes spent by :meth:`delay` (a request that will not wait)."""
        with self._lock:
            self._level += n

    async def wait(self, n: int) -> None:
        """Wait for ``n`` bytes, or raise the 429 :func:`busy_error` (nothing spent) when
        the wait would pass ``MAX_WAIT_S``: the queue of waiting requests stays short."""
        seconds = self.delay(n)
        if seconds > MAX_WAIT_S:
            self.refund(n)
            raise busy_error(retry_after_s=min(60, math.ceil(seconds - MAX_WAIT_S)))
        await asyncio.sleep(seconds)


class BodyClaim:
    """The bytes one request holds of a :class:`BodyBudget`."""

    def __init__(self, budget: BodyBudget) -> None:
        self.budget = budget
        self.bytes = 0

    def grow_to(self, n: int) -> None:
        """Hold ``n`` bytes in all, or raise the 429 :func:`busy_error`."""
        if n > self.bytes:
            if not self.budget.take(n - self.bytes):
                raise busy_error(total_bytes=self.budget.total_bytes)
            self.bytes = n


def busy_error(
    *, total_bytes: int | None = None, retry_after_s: int = RETRY_AFTER_S
) -> RequestError:
    """429 (the OpenAI rate-limit shape, ``Retry-After``): the large-body budget of
    ``total_bytes`` is spent, or the pace's queue is full."""
    why = (
        f"at most {total_bytes} bytes of large bodies at once"
        if total_bytes is not None
        else f"heavy bodies wait at most {MAX_WAIT_S:g} s for their turn"
    )
    return RequestError(
        429,
        f"The server is busy with other large requests ({why}); retry in {retry_after_s} s "
        "or send a smaller body.",
        param=None,
        code="rate_limit_exceeded",
        type_="requests",
        retry_after_s=retry_after_s,
    )


async def read_body(
    receive: Receive,
    headers: dict[bytes, bytes],
    limits: ServerLimits,
    claim: BodyClaim | None = None,
    pace: BodyPace | None = None,
) -> bytes:
    """The request body, at most ``limits.max_body_bytes`` (413 before reading when
    ``Content-Length`` says more; 413 as soon as a streamed body passes it), within
    ``limits.body_timeout_s`` (408). With a ``claim``, a large body holds its bytes of the
    budget first (429 when it cannot); with a ``pace``, it waits for its bytes of the
    bucket, before it is read when ``Content-Length`` gives its size, else once read."""
    cap = limits.max_body_bytes
    too_large = RequestError(
        413,
        f"Request body is larger than the limit of {cap} bytes (ServerLimits.max_body_bytes); "
        "send less, e.g. fewer or shorter tool schemas.",
        param=None,
    )
    declared = headers.get(b"content-length", b"0")
    if not declared.isdigit():
        raise RequestError(400, "Content-Length must be a non-negative integer.", param=None)
    if int(declared) > cap:
        raise too_large
    large = limits.large_body_bytes
    if claim is not None and int(declared) > large:
        claim.grow_to(int(declared))
    if pace is not None and int(declared) > large:
        await pace.wait(int(declared))
    chunks: list[bytes] = []
    size = 0
    try:
        async with asyncio.timeout(limits.body_timeout_s):
            while True:
                message = await receive()
                if message["type"] == "http.disconnect":
                    raise ClientDisconnected
                chunk = bytes(message.get("body", b""))
                size += len(chunk)
                if size > cap:
                    raise too_large
                if claim is not None and size > large:
                    claim.grow_to(size)
                chunks.append(chunk)
                if not message.get("more_body", False):
                    break
    except TimeoutError:
        raise RequestError(
            408, f"The request body did not arrive within {limits.body_timeout_s:g} s.", param=None
        ) from None
    if pace is not None and size > large and int(declared) <= large:  # chunked: paced once read
        await pace.wait(size)
    return b"".join(chunks)
