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
    ) -> None:
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


def start_endpoint(**kwargs: Any) -> tuple[RunningServer, EndpointApp]:
    """Start an :class:`EndpointApp` on loopback; use the server as a context manager."""
    app = EndpointApp(**kwargs)
    return start_app(app), app
