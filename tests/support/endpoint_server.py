"""A configurable OpenAI-compatible endpoint that tokenizes like a real serving stack (tests).

Served on the same uvicorn machinery as ``serve-reference``
(:func:`phaseaware.reference.uvicorn_serve.start_app`), on 127.0.0.1, port 0.
It renders chat messages with its own chat format, then plays the parts that make
a hosted endpoint's positions differ from the caller's rendering:

* ``hidden_prefix(i)``: text the server puts right after the BOS of request ``i``
  (a hidden system preamble; a varying date line when it depends on ``i``);
* ``extra_bos``: one more BOS token before everything (a server that adds BOS);
* ``template_edit``: ``(old, new)`` replaced once in every rendered prompt (a
  template version that differs by a character);
* ``renderer(messages, chat_template_kwargs)``: the server's own chat rendering in
  place of ``chat_format`` (a server whose template reads the request's settings);
* ``prompt_ids(body)``: the server's own prompt ids for a chat request in place of any
  rendering (a server that renders to ids itself: SGLang through deepseek-recipe);
* ``get_routes``: ``GET`` paths and the JSON they answer (a server's info routes);
* the prompt's ids come back where the request asks: ``return_token_ids`` (vLLM: on
  the response), ``return_prompt_token_ids`` (SGLang: on the choice);
* ``stream: true`` on chat answers with server-sent events as vLLM 0.32 writes them: the
  first chunk (the role; ``prompt_token_ids`` where ``return_token_ids`` asks), the
  content, the finish, the usage chunk for ``stream_options.include_usage``, then
  ``data: [DONE]``, sent in pieces of ``stream_piece`` bytes (an event spans pieces).
  ``return_prompt_token_ids`` on a stream is refused with SGLang's 400;
* ``tokenize_route``: vLLM's ``POST /tokenize`` (``messages`` or ``prompt`` in,
  ``{"count", "max_model_len", "tokens"}`` out; no hidden prefix: it shows the
  template only, as a gateway's preamble would not appear there either).

``/v1/completions`` takes ``prompt`` as text (BOS added when ``extra_bos``) or as a
list of token ids (used as is). Every generation request is logged as a
:class:`Served` (the exact text and the server's own tokenization), so a test can
confirm from what the server tokenized where evidence landed. ``answer(served,
body)`` returns the reply text (default ``"ok"``), or for chat a message dict
(``content``, ``tool_calls``: scripted tool calls for agent tests).
"""

from __future__ import annotations

import json
import threading
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from phaseaware.chat import get_chat_format, parse_messages
from phaseaware.reference.uvicorn_serve import Receive, RunningServer, Scope, Send, start_app
from phaseaware.tokenizers.base import TokenizedText, Tokenizer

__all__ = ["EndpointApp", "Served", "start_endpoint"]


@dataclass(frozen=True)
class Served:
    """One generation request as the server tokenized it."""

    index: int
    path: str
    text: str | None  # None: the prompt came as token ids
    ids: tuple[int, ...]
    tokens: TokenizedText | None  # the server's tokenization of ``text`` (extra BOS excluded)
    extra: int  # ids before ``tokens`` (the extra BOS)


class EndpointApp:
    """The ASGI app (see the module docstring)."""

    def __init__(
        self,
        *,
        tokenizer: Tokenizer,
        chat_format: str,
        model: str = "sim-model",
        hidden_prefix: Callable[[int], str] | None = None,
        extra_bos: bool = False,
        template_edit: tuple[str, str] | None = None,
        tokenize_route: bool = False,
        answer: Callable[[Served, dict[str, Any]], str | dict[str, Any]] | None = None,
        renderer: Callable[[list[dict[str, Any]], dict[str, Any] | None], str] | None = None,
        prompt_ids: Callable[[dict[str, Any]], list[int]] | None = None,
        get_routes: dict[str, Any] | None = None,
        stream_piece: int = 1000,
    ) -> None:
        self.stream_piece = stream_piece
        self.prompt_ids = prompt_ids
        self.get_routes = dict(get_routes or {})
        self.renderer = renderer
        self.tokenizer = tokenizer
        self.format = get_chat_format(chat_format, tokenizer)
        self.model = model
        self.hidden_prefix = hidden_prefix
        self.extra_bos = extra_bos
        self.template_edit = template_edit
        self.tokenize_route = tokenize_route
        self.answer = answer
        self.log: list[Served] = []
        self._lock = threading.Lock()
        self._count = 0
        bos = tokenizer.bos_text
        self._bos_ids = tuple(tokenizer.encode(bos)) if bos else (0,)

    def render(
        self,
        messages: list[dict[str, Any]],
        *,
        hidden: str = "",
        kwargs: dict[str, Any] | None = None,
    ) -> str:
        if self.renderer is not None:
            text = self.renderer(messages, kwargs)
        else:
            text = self.format.render(parse_messages(messages), add_generation_prompt=True)
        if self.template_edit is not None:
            old, new = self.template_edit
            text = text.replace(old, new, 1)
        bos = self.tokenizer.bos_text
        head = bos if bos and text.startswith(bos) else ""
        return head + hidden + text[len(head) :]

    def _next(self) -> int:
        with self._lock:
            index, self._count = self._count, self._count + 1
            return index

    def _generate(self, path: str, body: dict[str, Any]) -> tuple[int, dict[str, Any]]:
        index = self._next()
        hidden = self.hidden_prefix(index) if self.hidden_prefix is not None else ""
        extra = len(self._bos_ids) if self.extra_bos else 0
        if path.endswith("/chat/completions") and self.prompt_ids is not None:
            text, extra, ids = None, 0, tuple(self.prompt_ids(body))
        elif path.endswith("/chat/completions"):
            text = self.render(
                list(body["messages"]), hidden=hidden, kwargs=body.get("chat_template_kwargs")
            )
        else:
            prompt = body["prompt"]
            if isinstance(prompt, list) and all(isinstance(t, int) for t in prompt):
                text, extra = None, 0
                ids = tuple(prompt)
            else:
                text = hidden + str(prompt)
        tokens = self.tokenizer.tokenize(text) if text is not None else None
        if text is not None:
            ids = (self._bos_ids if extra else ()) + tuple(self.tokenizer.encode(text))
        served = Served(index, path, text, ids, tokens, extra)
        with self._lock:
            self.log.append(served)
        reply = self.answer(served, body) if self.answer is not None else "ok"
        chat = path.endswith("/chat/completions")
        choice: dict[str, Any] = {"index": 0, "finish_reason": "stop", "logprobs": None}
        if chat and isinstance(reply, dict):  # a scripted message (e.g. with tool_calls)
            choice["message"] = {"role": "assistant", **reply}
            choice["finish_reason"] = "tool_calls" if reply.get("tool_calls") else "stop"
        elif chat:
            choice["message"] = {"role": "assistant", "content": reply}
        else:
            choice["text"] = reply
        if chat and body.get("return_prompt_token_ids"):  # SGLang: on the choice
            choice["prompt_token_ids"] = list(ids)
        extra_ids = {"prompt_token_ids": list(ids)} if body.get("return_token_ids") else {}
        return 200, {
            **extra_ids,  # vLLM: on the response
            "id": f"sim-{index}",
            "object": "chat.completion" if chat else "text_completion",
            "created": 0,
            "model": self.model,
            "choices": [choice],
            "usage": {"prompt_tokens": len(ids), "completion_tokens": 1,
                      "total_tokens": len(ids) + 1},
        }  # fmt: skip

    def _tokenize(self, body: dict[str, Any]) -> tuple[int, dict[str, Any]]:
        if "messages" in body:
            text = self.render(list(body["messages"]), kwargs=body.get("chat_template_kwargs"))
            ids = list(self.tokenizer.encode(text))
        else:
            ids = list(self.tokenizer.encode(str(body["prompt"])))
        if self.extra_bos:
            ids = list(self._bos_ids) + ids
        return 200, {"count": len(ids), "max_model_len": 1 << 20, "tokens": ids}

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] == "lifespan":
            while True:
                message = await receive()
                kind = message["type"].rsplit(".", 1)[-1]
                await send({"type": f"lifespan.{kind}.complete"})
                if kind == "shutdown":
                    return
        if scope["type"] != "http":
            return
        raw = b""
        while True:
            message = await receive()
            raw += message.get("body", b"")
            if not message.get("more_body", False):
                break
        path = str(scope["path"]).rstrip("/")
        body = json.loads(raw) if raw else {}
        if scope.get("method") == "GET" and path in self.get_routes:
            status, payload = 200, self.get_routes[path]
        elif path == "/v1/chat/completions" and body.get("stream"):
            if not body.get("return_prompt_token_ids"):
                await self._stream(send, *self._generate(path, body), body)
                return
            status, payload = 400, {"error": {"message": SGLANG_STREAM_REFUSAL,
                                              "type": "BadRequestError"}}  # fmt: skip
        elif path in ("/v1/chat/completions", "/v1/completions"):
            status, payload = self._generate(path, body)
        elif path == "/tokenize" and self.tokenize_route:
            status, payload = self._tokenize(body)
        elif path == "/v1/models":
            status, payload = 200, {"object": "list", "data": [{"id": self.model,
                                                                "object": "model"}]}  # fmt: skip
        else:
            status, payload = 404, {"error": {"message": f"Unknown URL {path}",
                                              "type": "invalid_request_error"}}  # fmt: skip
        data = json.dumps(payload).encode()
        await send({"type": "http.response.start", "status": status,
                    "headers": [(b"content-type", b"application/json"),
                                (b"content-length", str(len(data)).encode())]})  # fmt: skip
        await send({"type": "http.response.body", "body": data})

    async def _stream(self, send: Send, status: int, reply: dict[str, Any], body: Any) -> None:
        """``reply`` (a chat completion) as vLLM's event stream, in pieces."""
        data = b"".join(f"data: {json.dumps(e)}\n\n".encode() for e in _chunks(reply, body))
        data += b"data: [DONE]\n\n"
        await send({"type": "http.response.start", "status": status,
                    "headers": [(b"content-type", b"text/event-stream; charset=utf-8")]})  # fmt: skip
        for start in range(0, len(data), self.stream_piece):
            piece = data[start : start + self.stream_piece]
            await send({"type": "http.response.body", "body": piece, "more_body": True})
        await send({"type": "http.response.body", "body": b""})


#: SGLang 0.5.23's refusal of the ids field on a stream (``serving_chat.py``)
SGLANG_STREAM_REFUSAL = "Please set stream=false when using return_prompt_token_ids=true"


def _chunks(reply: dict[str, Any], body: dict[str, Any]) -> list[dict[str, Any]]:
    """The stream chunks of one chat completion as vLLM 0.32 sends them: the prompt's ids
    on the first chunk only, the usage chunk (no choices) last."""
    head = {k: reply[k] for k in ("id", "created", "model")}
    head["object"] = "chat.completion.chunk"
    choice = reply["choices"][0]
    message = choice["message"]

    def chunk(delta: dict[str, Any], finish: str | None = None) -> dict[str, Any]:
        return {**head, "choices": [{"index": 0, "delta": delta, "logprobs": None,
                                     "finish_reason": finish}]}  # fmt: skip

    first = chunk({"role": "assistant", "content": ""})
    if "prompt_token_ids" in reply:
        first["prompt_token_ids"] = reply["prompt_token_ids"]
    text = message.get("content") or ""
    out = [first, *(chunk({"content": text[i : i + 3]}) for i in range(0, len(text), 3))]
    calls = message.get("tool_calls") or []
    out += [chunk({"tool_calls": [{"index": i, **c}]}) for i, c in enumerate(calls)]
    out.append(chunk({}, choice["finish_reason"]))
    if (body.get("stream_options") or {}).get("include_usage"):
        out.append({**head, "choices": [], "usage": reply["usage"]})
    return out


def start_endpoint(**kwargs: Any) -> tuple[RunningServer, EndpointApp]:
    """Start an :class:`EndpointApp` on loopback; use the server as a context manager."""
    app = EndpointApp(**kwargs)
    return start_app(app), app
