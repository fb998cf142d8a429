"""The server's batching queue, and the watch for a client that has gone.

:class:`Batcher` collects concurrent requests into ``generate_batch`` calls of a
:class:`~phaseaware.reference.engine.BatchEngine`, one call at a time, in one worker thread:
requests that arrive within ``batch_window_s`` of each other start together, and requests
that arrive while a batch runs join it at the engine's next step (continuous batching, up
to ``max_batch`` rows at once), so a short request never waits for a long generation to end;
each is answered as soon as its own row ends. A request whose ``cancel`` event is set (its client
left) is left out of the next batch, and the engine drops it from the running one at its
next step; :meth:`Batcher.close` cancels every row in flight (server shutdown).
"""

from __future__ import annotations

import asyncio
import collections
import functools
import threading
from concurrent.futures import ThreadPoolExecutor

from phaseaware.reference.engine import BatchEngine, GenerationRequest, GenerationResult
from phaseaware.reference.uvicorn_serve import Receive, ServerLimits

__all__ = ["Batcher", "disconnected"]


async def disconnected(receive: Receive) -> None:
    """Return once the client has gone (the body was read: only ``http.disconnect`` is left)."""
    while True:
        message = await receive()
        if message["type"] == "http.disconnect":
            return


class Batcher:
    """Collects concurrent requests into ``generate_batch`` calls, one at a time; requests
    that arrive while a batch runs join it at the engine's next step (``admit``), up to
    ``max_batch`` rows at once, and each is answered as soon as its row ends (``done``)."""

    def __init__(self, engine: BatchEngine, limits: ServerLimits) -> None:
        self._engine = engine
        self._limits = limits
        self._executor = ThreadPoolExecutor(1, thread_name_prefix="phaseaware-batch")
        # requests waiting for a row: appended on the event loop, taken by the loop or by
        # the engine's thread (admit), so guarded by a lock
        self._waiting: collections.deque[_Pending] = collections.deque()
        self._lock = threading.Lock()
        self._wake: asyncio.Event | None = None
        self._task: asyncio.Task[None] | None = None
        self._running: dict[int, _Pending] = {}  # id(request) -> its pending entry

    async def submit(self, request: GenerationRequest) -> GenerationResult:
        loop = asyncio.get_running_loop()
        if self._task is None:
            self._wake = asyncio.Event()
            self._task = loop.create_task(self._run())
        future: asyncio.Future[GenerationResult] = loop.create_future()
        with self._lock:
            self._waiting.append((request, future))
        assert self._wake is not None
        self._wake.set()
        return await future

    def _take(self) -> list[_Pending]:
        """Waiting requests for free rows (at most ``max_batch`` running), live ones only."""
        taken: list[_Pending] = []
        with self._lock:
            while self._waiting and len(self._running) < self._limits.max_batch:
                request, future = self._waiting.popleft()
                if future.done() or request.cancelled:
                    continue
                self._running[id(request)] = (request, future)
                taken.append((request, future))
        return taken

    def _done(self, loop: asyncio.AbstractEventLoop, request: GenerationRequest,
              result: GenerationResult) -> None:  # fmt: skip
        with self._lock:
            entry = self._running.pop(id(request), None)
        if entry is not None:
            loop.call_soon_threadsafe(_settle, entry[1], result)

    async def _run(self) -> None:
        loop = asyncio.get_running_loop()
        assert self._wake is not None
        while True:
            await self._wake.wait()
            self._wake.clear()
            with self._lock:
                alone = len(self._waiting) == 1
            if alone:  # idle engine: give companions a moment to arrive
                await asyncio.sleep(self._limits.batch_window_s)
            batch = self._take()
            if not batch:
                continue
            requests = [r for r, _ in batch]

            def admit() -> list[GenerationRequest]:
                return [r for r, _ in self._take()]

            def done(request: GenerationRequest, result: GenerationResult) -> None:
                self._done(loop, request, result)

            call = functools.partial(self._engine.generate_batch, requests, admit=admit, done=done)
            try:
                results = await loop.run_in_executor(self._executor, call)
            except Exception as exc:
                with self._lock:
                    failed = list(self._running.values())
                    self._running.clear()
                for _, future in failed:
                    if not future.done():
                        future.set_exception(exc)
                continue
            for request, result in zip(requests, results, strict=True):
                self._done(loop, request, result)  # rows the engine did not report
            with self._lock:
                orphans = list(self._running.values())  # admitted, never reported: a bug
                self._running.clear()
                more = bool(self._waiting)
            for _, future in orphans:
                if not future.done():
                    future.set_exception(RuntimeError("the engine did not report an admitted row"))
            if more:
                self._wake.set()

    def close(self) -> None:
        with self._lock:
            running = [r for r, _ in self._running.values()]
        for request in running:  # the batch in flight stops at its next step
            if request.cancel is not None:
                request.cancel.set()
        if self._task is not None:
            self._task.cancel()
        self._executor.shutdown(wait=False, cancel_futures=True)


_Pending = tuple[GenerationRequest, "asyncio.Future[GenerationResult]"]


def _settle(future: asyncio.Future[GenerationResult], result: GenerationResult) -> None:
    if not future.done():
        future.set_result(result)
