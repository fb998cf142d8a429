"""A stand-in SSE front for a server that does not stream yet (tests only).

:func:`streaming_url` yields a base URL that answers ``"stream": true``: the server's
own when it streams (``text/event-stream``), else a front on ``127.0.0.1`` that sends
the request to the server without ``stream``/``stream_options`` and replays its whole
answer as OpenAI-format server-sent events (a role chunk, the text in small pieces, the
finish chunk, and, with ``stream_options.include_usage``, a last chunk with the
server's ``usage`` and no choices), then ``data: [DONE]``. The answer and its usage are
the server's; only the framing is the front's. Once ``serve-reference`` streams, the
front is never started.
"""

from __future__ import annotations

import json
import threading
import urllib.error
import urllib.request
from collections.abc import Iterator
from contextlib import contextmanager
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

__all__ = ["server_streams", "streaming_url"]


def _post(url: str, body: dict[str, Any]) -> urllib.request.Request:
    return urllib.request.Request(
        url, data=json.dumps(body).encode(), headers={"Content-Type": "application/json"}
    )


def server_streams(base_url: str, model: str) -> bool:
    """Whether ``base_url`` answers a ``stream: true`` chat request with server-sent events."""
    body = {"model": model, "messages": [{"role": "user", "content": "hi"}], "max_tokens": 1,
            "stream": True}  # fmt: skip
    try:
        with urllib.request.urlopen(_post(base_url + "/chat/completions", body), timeout=60) as r:
            r.read()
            return "text/event-stream" in r.headers.get("Content-Type", "")
    except urllib.error.HTTPError:
        return False


def _events(out: dict[str, Any], include_usage: bool) -> Iterator[dict[str, Any]]:
    chat = "message" in out["choices"][0]
    choice = out["choices"][0]
    text = (choice["message"]["content"] if chat else choice["text"]) or ""
    base = {"id": out["id"], "created": out["created"], "model": out["model"],
            "object": "chat.completion.chunk" if chat else "text_completion"}  # fmt: skip
    pieces = [text[i : i + 2] for i in range(0, len(text), 2)] or [""]
    for k, piece in enumerate(pieces):
        delta = ({"role": "assistant"} if k == 0 else {}) | {"content": piece}
        part = {"delta": delta} if chat else {"text": piece}
        yield {**base, "choices": [{"index": 0, **part, "finish_reason": None}]}
    end = {"delta": {}} if chat else {"text": ""}
    yield {**base, "choices": [{"index": 0, **end, "finish_reason": choice["finish_reason"]}]}
    if include_usage:
        yield {**base, "choices": [], "usage": out["usage"]}


def _handler(root: str) -> type[BaseHTTPRequestHandler]:
    class Handler(BaseHTTPRequestHandler):
        def log_message(self, *args: Any) -> None:  # quiet
            pass

        def do_POST(self) -> None:
            body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
            stream = body.pop("stream", False)
            include_usage = bool((body.pop("stream_options", None) or {}).get("include_usage"))
            try:
                with urllib.request.urlopen(_post(root + self.path, body), timeout=120) as r:
                    raw = r.read()
            except urllib.error.HTTPError as exc:
                raw = exc.read()
                self.send_response(exc.code)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(raw)))
                self.end_headers()
                self.wfile.write(raw)
                return
            if not stream:
                self.send_response(200)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(raw)))
                self.end_headers()
                self.wfile.write(raw)
                return
            self.send_response(200)
            self.send_header("Content-Type", "text/event-stream")
            self.end_headers()
            for event in _events(json.loads(raw), include_usage):
                self.wfile.write(b"data: " + json.dumps(event).encode() + b"\n\n")
            self.wfile.write(b"data: [DONE]\n\n")
            self.wfile.flush()

    return Handler


@contextmanager
def streaming_url(base_url: str, model: str) -> Iterator[str]:
    """``base_url`` if the server streams, else a stand-in front's URL (see the module)."""
    base_url = base_url.rstrip("/")
    if server_streams(base_url, model):
        yield base_url
        return
    root = base_url.removesuffix("/v1")
    front = ThreadingHTTPServer(("127.0.0.1", 0), _handler(root))
    thread = threading.Thread(target=front.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{front.server_address[1]}" + base_url[len(root) :]
    finally:
        front.shutdown()
        front.server_close()
        thread.join()
