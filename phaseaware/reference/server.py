"""An OpenAI-compatible HTTP server for one :class:`ServerEngine`, on uvicorn.

Serves ``GET /v1/models``, ``POST /v1/chat/completions`` and ``POST /v1/completions``
(``n == 1``; ``stream=true`` answers with server-sent events in the OpenAI chunk format,
``stream_options.include_usage`` adds the final usage chunk, ``data: [DONE]`` ends it; the
completion is generated before the first byte goes out, so every error is still a JSON
4xx/5xx answer). :class:`OpenAIApp` is a plain ASGI application and uvicorn
(h11, started by :mod:`phaseaware.reference.uvicorn_serve`) does the HTTP: parsing, keep-alive, the listen backlog (2048), graceful shutdown.
Plain ASGI rather than starlette because three routes need no framework, and the one thing
that matters here, WHEN the body is read, is explicit: every request passes, in order,

1. routing and ``Authorization: Bearer <key>`` (constant-time compare), on headers only;
2. ``Content-Length`` against :attr:`ServerLimits.max_body_bytes` (413 unread), then the
   body under the same cap while it streams (chunked bodies) and a read deadline (408); a
   body over ``large_body_bytes`` first holds its bytes of the large-body budget (429 with
   ``Retry-After`` when spent) and waits for the pace (:mod:`phaseaware.reference.admission`);
3. :func:`decode_json_body` (depth-limited, 400), then request validation (400/404): on
   the event loop for a light body; a heavy one (over ``large_body_bytes``, or over
   ``large_body_values`` JSON values) waits for the pace by its cost
   (``VALUE_COST_BYTES`` a value) and is decoded in one worker thread, one at a time, so
   light requests never queue behind a heavy one's decoding;
4. generation. A :class:`BatchEngine` gets token ids (the rendered chat tokenized by the
   engine as vLLM does, control-token text in content included) and a batching queue:
   requests that arrive while the engine is busy, or within ``batch_window_s`` of each
   other, run as one ``generate_batch`` call of up to ``max_batch`` rows, so throughput
   rises with concurrency. An engine may stop
   tokenizing a prompt past its context (:class:`ContextOverflow`: 400
   ``context_length_exceeded``, "at least N tokens"). Any other engine runs one
   ``generate`` per request in worker threads, at most ``engine_parallelism`` at a time.

Errors use the OpenAI shape ``{"error": {"message", "type", "param", "code"}}``: 400
``invalid_request_error`` for every client mistake, 404 ``model_not_found``, 401
``invalid_api_key``; 500 ``server_error`` only for the server's own faults (logged with
their traceback on the ``phaseaware.reference.server`` logger). A client that disconnects is
not an error: nothing is logged above DEBUG. Timeouts: a request head must arrive within
``head_timeout_s`` of the connection opening (or of the previous answer), an idle
keep-alive connection closes after ``keep_alive_s``, a body must arrive within
``body_timeout_s``.
"""

from __future__ import annotations

import asyncio
import hmac
import json
import logging
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from contextlib import AbstractAsyncContextManager, nullcontext
from typing import Any, Protocol, runtime_checkable

from phaseaware.reference.admission import (
    VALUE_COST_BYTES,
    BodyBudget,
    BodyPace,
    ClientDisconnected,
    read_body,
)
from phaseaware.reference.batching import Batcher, disconnected
from phaseaware.reference.engine import (
    BatchEngine,
    ContextOverflow,
    GenerationRequest,
    GenerationResult,
    PromptError,
    ServerEngine,
)
from phaseaware.reference.openai_protocol import (
    CompletionParams,
    RequestError,
    decode_json_body,
    error_body,
    parse_chat_request,
    parse_completion_request,
    value_estimate,
)
from phaseaware.reference.openai_responses import completion_body, models_body, stream_chunks
from phaseaware.reference.uvicorn_serve import (
    Message,
    Receive,
    RunningServer,
    Scope,
    Send,
    ServerLimits,
    bind_socket,
    serve,
    start_app,
)

__all__ = [
    "ClientDisconnected",
    "Message",
    "Receive",
    "Scope",
    "Send",
    "OpenAIApp",
    "RunningServer",
    "ServerLimits",
    "bind_socket",
    "read_body",
    "send_json",
    "send_sse",
    "serve",
    "start_app",
    "start_server",
]

logger = logging.getLogger(__name__)
_ROUTES = {"/v1/models": "GET", "/v1/chat/completions": "POST", "/v1/completions": "POST"}


@runtime_checkable
class ContextLimited(Protocol):
    """An engine that caps prompt + completion tokens (``None``: no cap)."""

    max_context_tokens: int | None


async def send_json(
    send: Send, status: int, payload: object, headers: dict[str, str] | None = None
) -> None:
    """Answer with ``payload`` as JSON (uvicorn drops it if the client has gone)."""
    data = json.dumps(payload).encode("utf-8")
    raw = [(b"content-type", b"application/json"), (b"content-length", str(len(data)).encode())]
    raw += [(k.lower().encode("latin-1"), v.encode("latin-1")) for k, v in (headers or {}).items()]
    await send({"type": "http.response.start", "status": status, "headers": raw})
    await send({"type": "http.response.body", "body": data, "more_body": False})


async def send_sse(send: Send, events: list[dict[str, Any]]) -> None:
    """Answer with ``events`` as server-sent events (``data: <json>``), then ``data: [DONE]``."""
    raw = [
        (b"content-type", b"text/event-stream; charset=utf-8"),
        (b"cache-control", b"no-cache"),
    ]
    await send({"type": "http.response.start", "status": 200, "headers": raw})
    for event in events:
        data = b"data: " + json.dumps(event).encode("utf-8") + b"\n\n"
        await send({"type": "http.response.body", "body": data, "more_body": True})
    await send({"type": "http.response.body", "body": b"data: [DONE]\n\n", "more_body": False})


class OpenAIApp:
    """The ASGI application serving ``engine`` (see the module docstring for the rules).

    ``api_key``: when set, requests must carry ``Authorization: Bearer <key>`` (401
    otherwise); ``None`` disables the check. ``engine_parallelism``: most concurrent
    ``generate`` calls for an engine without batching (``None``: unlimited).
    """

    def __init__(
        self,
        engine: ServerEngine,
        *,
        api_key: str | None = None,
        limits: ServerLimits | None = None,
        engine_parallelism: int | None = 1,
    ) -> None:
        if engine_parallelism is not None and engine_parallelism < 1:
            raise ValueError(f"engine_parallelism must be >= 1 or None, got {engine_parallelism}")
        self.engine = engine
        self.limits = limits or ServerLimits()
        self._key = api_key.encode() if api_key is not None else None
        self._gate = asyncio.Semaphore(engine_parallelism) if engine_parallelism else None
        self._workers = ThreadPoolExecutor(64, thread_name_prefix="phaseaware-engine")
        # large bodies are decoded here, one at a time, off the event loop
        self._decoder = ThreadPoolExecutor(1, thread_name_prefix="phaseaware-decode")
        self._budget = BodyBudget(self.limits.max_large_body_bytes)
        self._pace = BodyPace(self.limits.large_body_bytes_per_s, 2 * self.limits.max_body_bytes)
        self._batcher = Batcher(engine, self.limits) if isinstance(engine, BatchEngine) else None
        self.created = int(time.time())

    def close(self) -> None:
        """Stop the worker threads (idempotent; uvicorn's lifespan shutdown calls it)."""
        if self._batcher is not None:
            self._batcher.close()
        self._workers.shutdown(wait=False, cancel_futures=True)
        self._decoder.shutdown(wait=False, cancel_futures=True)

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] == "lifespan":
            await self._lifespan(receive, send)
            return
        if scope["type"] != "http":
            return  # uvicorn runs without websockets
        headers = dict(scope["headers"])
        answer_headers: dict[str, str] = {}
        payload: dict[str, Any] | list[dict[str, Any]]
        try:
            status, payload = await self.handle(scope, receive, headers)
        except ClientDisconnected:
            logger.debug("client disconnected before its request was read")
            return
        except RequestError as exc:
            status, payload = exc.status, exc.to_body()
            if exc.status in (
                401,
                404,
                405,
                408,
                413,
                429,
            ):  # the body may be unread: do not drain it
                answer_headers["connection"] = "close"
            if exc.retry_after_s is not None:
                answer_headers["retry-after"] = str(exc.retry_after_s)
        except Exception as exc:  # a bug of this server: say so, keep serving
            logger.error("server error on %s %s", scope["method"], scope["path"], exc_info=exc)
            status = 500
            payload = error_body(500, f"server error: {type(exc).__name__}", type_="server_error")
        if isinstance(payload, list):
            await send_sse(send, payload)
        else:
            await send_json(send, status, payload, answer_headers)

    async def handle(
        self, scope: Scope, receive: Receive, headers: dict[bytes, bytes]
    ) -> tuple[int, dict[str, Any] | list[dict[str, Any]]]:
        """``(status, JSON payload)`` for one request, or ``(200, chunks)`` for a streaming
        one; raises :class:`RequestError` for the client's mistakes."""
        method, path = str(scope["method"]), str(scope["path"]).rstrip("/")
        if self._key is not None and not self._authorized(headers):
            message = "Incorrect API key provided (send it as 'Authorization: Bearer <key>')."
            raise RequestError(401, message, param=None, code="invalid_api_key")
        want = _ROUTES.get(path)
        if want is None:
            raise RequestError(404, f"Unknown URL: {method} {path}", param=None, code="unknown_url")
        if method != want:
            raise RequestError(405, f"{path} takes {want}, not {method}", param=None)
        if want == "GET":
            return 200, models_body(self.engine.model_name, self.created)
        with self._budget.claim() as claim:  # a large body's bytes, held until it is answered
            raw = await read_body(receive, headers, self.limits, claim, self._pace)
            params = await self._decode(path, raw)
            del raw
            return await self._answer(path, params, receive)

    async def _decode(self, path: str, raw: bytes) -> CompletionParams:
        """:meth:`_params` of ``raw``: on the event loop for a light body; for a heavy one
        (large, or many values), after the pace by its cost, in the decoder thread."""
        paid = len(raw) if len(raw) > self.limits.large_body_bytes else 0  # paced by bytes
        # past max_json_items the decoder refuses the body at once: no cost beyond that
        values = min(value_estimate(raw), self.limits.max_json_items)
        if not paid and values <= self.limits.large_body_values:
            return self._params(path, raw)
        owed = values * VALUE_COST_BYTES - paid
        if owed > 0:
            await self._pace.wait(owed)
        loop = asyncio.get_running_loop()
        return await loop.run_in_executor(self._decoder, self._params, path, raw)

    def _params(self, path: str, raw: bytes) -> CompletionParams:
        """The validated request in ``raw`` (400/404 :class:`RequestError` otherwise)."""
        limits, name = self.limits, self.engine.model_name
        doc = decode_json_body(
            raw, max_depth=limits.max_json_depth, max_items=limits.max_json_items
        )
        if path.endswith("/chat/completions"):
            return parse_chat_request(
                doc,
                model_name=name,
                max_messages=limits.max_messages,
                max_chars=limits.max_prompt_chars,
            )
        return parse_completion_request(doc, model_name=name, max_chars=limits.max_prompt_chars)

    async def _answer(
        self, path: str, params: CompletionParams, receive: Receive
    ) -> tuple[int, dict[str, Any] | list[dict[str, Any]]]:
        try:
            prompt_tokens, result = await self._until_disconnect(params, receive)
        except (RequestError, ClientDisconnected):
            raise
        except ContextOverflow as exc:
            raise _overflow_error(exc.tokens, exc.limit, params, at_least=True) from None
        except PromptError as exc:
            raise RequestError(400, str(exc), param="messages") from exc
        except Exception as exc:  # the engine failed: report it, keep serving
            logger.error("engine error on %s", path, exc_info=exc)
            payload = error_body(500, f"engine error: {exc}", type_="server_error")
            return 500, payload
        if params.stream:
            return 200, stream_chunks(params, result, prompt_tokens, self.created)
        return 200, dict(completion_body(params, result, prompt_tokens, self.created))

    async def _until_disconnect(
        self, params: CompletionParams, receive: Receive
    ) -> tuple[int, GenerationResult]:
        """:meth:`_complete`, abandoned (its engine row cancelled) as soon as the client
        disconnects or the server cancels the request (shutdown); raises
        :class:`ClientDisconnected` then."""
        cancel = threading.Event()
        work = asyncio.ensure_future(self._complete(params, cancel))
        gone = asyncio.ensure_future(disconnected(receive))
        try:
            await asyncio.wait({work, gone}, return_when=asyncio.FIRST_COMPLETED)
        finally:
            if not work.done():
                cancel.set()
                work.cancel()
            gone.cancel()
        if not work.done() or work.cancelled():
            raise ClientDisconnected
        return work.result()

    async def _complete(
        self, params: CompletionParams, cancel: threading.Event | None = None
    ) -> tuple[int, GenerationResult]:
        loop = asyncio.get_running_loop()
        engine = self.engine
        if self._batcher is not None and isinstance(engine, BatchEngine):
            encode = (
                (lambda: engine.encode_prompt(params.prompt))
                if params.messages is None
                else (lambda: engine.encode_chat(params.messages or ()))
            )
            ids = await loop.run_in_executor(self._workers, encode)
            self._check_context(len(ids), params)
            if cancel is not None and cancel.is_set():
                raise ClientDisconnected
            request = GenerationRequest(tuple(ids), params.max_tokens, params.stop, cancel)
            return len(ids), await self._batcher.submit(request)
        prompt, prompt_tokens = await loop.run_in_executor(self._workers, self._prompt, params)
        self._check_context(prompt_tokens, params)
        gate: AbstractAsyncContextManager[Any] = self._gate or nullcontext()
        async with gate:
            result = await loop.run_in_executor(
                self._workers,
                lambda: engine.generate(
                    prompt,
                    max_tokens=params.max_tokens,
                    temperature=params.temperature,
                    stop=params.stop,
                ),
            )
        return prompt_tokens, result

    def _prompt(self, params: CompletionParams) -> tuple[str, int]:
        engine = self.engine
        prompt = params.prompt if params.messages is None else engine.render_chat(params.messages)
        return prompt, int(engine.count_tokens(prompt))

    def _check_context(self, prompt_tokens: int, params: CompletionParams) -> None:
        limit = self.engine.max_context_tokens if isinstance(self.engine, ContextLimited) else None
        if limit is None or prompt_tokens + params.max_tokens <= int(limit):
            return
        raise _overflow_error(prompt_tokens, int(limit), params, at_least=False)

    def _authorized(self, headers: dict[bytes, bytes]) -> bool:
        scheme, _, token = headers.get(b"authorization", b"").partition(b" ")
        assert self._key is not None
        return scheme.lower() == b"bearer" and hmac.compare_digest(token.strip(), self._key)

    async def _lifespan(self, receive: Receive, send: Send) -> None:
        while True:
            message = await receive()
            if message["type"] == "lifespan.startup":
                await send({"type": "lifespan.startup.complete"})
            elif message["type"] == "lifespan.shutdown":
                self.close()
                await send({"type": "lifespan.shutdown.complete"})
                return


def _overflow_error(
    prompt_tokens: int, limit: int, params: CompletionParams, *, at_least: bool
) -> RequestError:
    """400 ``context_length_exceeded``; ``at_least``: the engine stopped counting the
    prompt at ``prompt_tokens``, already past the ``limit``."""
    more = "at least " if at_least else ""
    where = "messages" if params.messages is not None else "prompt"
    return RequestError(
        400,
        f"This model's maximum context length is {limit} tokens. However, you requested "
        f"{more}{prompt_tokens + params.max_tokens} tokens ({more}{prompt_tokens} in the "
        f"{where}, {params.max_tokens} in the completion).",
        param=where,
        code="context_length_exceeded",
    )


def start_server(
    engine: ServerEngine,
    *,
    host: str = "127.0.0.1",
    port: int = 0,
    api_key: str | None = None,
    limits: ServerLimits | None = None,
    engine_parallelism: int | None = 1,
) -> RunningServer:
    """Serve ``engine`` on ``host:port`` (port 0 picks a free port) in a background thread."""
    app = OpenAIApp(engine, api_key=api_key, limits=limits, engine_parallelism=engine_parallelism)
    return start_app(app, host=host, port=port, limits=app.limits)
