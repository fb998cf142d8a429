"""The server's batching queue, and the watch for a client that has gone.

:class:`Batcher` collects concurrent requests into ``generate_batch`` calls of a
:class:`~phaseaware.reference.engine.BatchEngine`, one call at a time, in one worker thread:
requests that arrive while the engine is busy, or within ``batch_window_s`` of each other,
run together (up to ``max_batch`` rows). A request whose ``cancel`` event is set (its client
left) is left out of the next batch, and the engine drops it from the running one at its
next step; :meth:`Batcher.close` cancels every row in flight (server shutdown).
"""

from __future__ import annotations

import asyncio
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
    """Collects concurrent requests into ``generate_batch`` calls, one at a time."""

    def __init__(self, engine: BatchEngine, limits: ServerLimits) -> None:
        self._engine = engine
        self._limits = limits
        self._executor = ThreadPoolExecutor(1, thread_name_prefix="phaseaware-batch")
        self._queue: asyncio.Queue[tuple[GenerationRequest, asyncio.Future[GenerationResult]]]
        self._task: asyncio.Task[None] | None = None
        self._running: list[GenerationRequest] = []

    async def submit(self, request: GenerationRequest) -> GenerationResult:
        loop = asyncio.get_running_loop()
        if self._task is None:
            self._queue = asyncio.Queue()
            self._task = loop.create_task(self._run())
        future: asyncio.Future[GenerationResult] = loop.create_future()
        self._queue.put_nowait((request, future))
        return await future

    async def _run(self) -> None:
        loop = asyncio.get_running_loop()
        while True:
            batch = [await self._queue.get()]
            if self._queue.empty():  # idle engine: give companions a moment to arrive
                await asyncio.sleep(self._limits.batch_window_s)
            while len(batch) < self._limits.max_batch and not self._queue.empty():
                batch.append(self._queue.get_nowait())
            live = [(r, f) for r, f in batch if not f.done() and not r.cancelled]
            requests = [r for r, _ in live]
            if not requests:
                continue
            self._running = requests
            try:
                results = await loop.run_in_executor(
                    self._executor, self._engine.generate_batch, requests
                )
            except Exception as exc:
                for _, future in live:
                    if not future.done():
                        future.set_exception(exc)
                continue
            for (_, future), result in zip(live, results, strict=True):
                if not future.done():
                    future.set_result(result)

    def close(self) -> None:
        for request in self._running:  # the batch in flight stops at its next step
            if request.cancel is not None:
                request.cancel.set()
        if self._task is not None:
            self._task.cancel()
        self._executor.shutdown(wait=False, cancel_futures=True)
