"""The OpenAI-compatible server (uvicorn + ASGI): shapes, validation, auth, limits,
timeouts, batching, disconnects, faults, request log."""

from __future__ import annotations

import http.client
import json
import socket
import time

import pytest

from phaseaware.reference.server import ServerLimits
from tests.support.fault_server import Fault, RequestInfo, start_server
from tests.support.task_engine import BatchLookupEngine, TaskLookupEngine

MODEL = "phaseaware-task-lookup"
CONTENT = "The access code for Alice is 123 . What is the access code for Alice ?"
CHAT = {"model": MODEL, "messages": [{"role": "user", "content": CONTENT}], "max_tokens": 4}
COMPLETION = {"model": MODEL, "prompt": CONTENT, "max_tokens": 4, "temperature": 0}


def _request(server, method, path, body=None, *, raw=None, headers=None):
    """(status, decoded JSON) for one request on a fresh connection."""
    conn = http.client.HTTPConnection(server.host, server.port, timeout=5)
    try:
        data = raw if raw is not None else (json.dumps(body).encode() if body is not None else None)
        all_headers = {"Content-Type": "application/json", **(headers or {})}
        conn.request(method, path, body=data, headers=all_headers)
        response = conn.getresponse()
        return response.status, json.loads(response.read() or b"null")
    finally:
        conn.close()


@pytest.fixture()
def server():
    with start_server(TaskLookupEngine()) as running:
        yield running


def test_models_lists_the_served_model(server):
    status, body = _request(server, "GET", "/v1/models")
    assert status == 200
    assert body["object"] == "list"
    assert [m["id"] for m in body["data"]] == [MODEL]
    assert body["data"][0]["object"] == "model"


def test_chat_completion_shape_and_usage(server):
    status, body = _request(server, "POST", "/v1/chat/completions", CHAT)
    assert status == 200
    assert body["object"] == "chat.completion"
    assert body["id"].startswith("chatcmpl-")
    assert body["model"] == MODEL
    assert isinstance(body["created"], int)
    (choice,) = body["choices"]
    assert choice["index"] == 0
    assert choice["message"] == {"role": "assistant", "content": " 123 ."}
    assert choice["finish_reason"] == "stop"
    usage = body["usage"]
    # "<bos> <user> " + 16 words of content + " <assistant>"
    assert usage["prompt_tokens"] == 3 + len(CONTENT.split())
    assert usage["completion_tokens"] == 2
    assert usage["total_tokens"] == usage["prompt_tokens"] + usage["completion_tokens"]


def test_text_completion_shape(server):
    status, body = _request(server, "POST", "/v1/completions", COMPLETION)
    assert status == 200
    assert body["object"] == "text_completion"
    assert body["choices"][0]["text"] == " 123 ."
    assert body["usage"]["prompt_tokens"] == len(CONTENT.split())


def test_max_tokens_truncates_with_finish_reason_length(server):
    status, body = _request(server, "POST", "/v1/completions", {**COMPLETION, "max_tokens": 1})
    assert status == 200
    assert body["choices"][0]["finish_reason"] == "length"
    assert body["usage"]["completion_tokens"] == 1


def _chat(**changes):
    body = dict(CHAT)
    for key, value in changes.items():
        if value is _DROP:
            body.pop(key)
        else:
            body[key] = value
    return body


_DROP = object()

BAD_REQUESTS = [
    ("bad json", "/v1/chat/completions", b'{"model": ', None),
    ("empty body", "/v1/chat/completions", b"", None),
    ("json array", "/v1/chat/completions", b"[1, 2]", None),
    ("missing model", "/v1/chat/completions", _chat(model=_DROP), "model"),
    ("model not a string", "/v1/chat/completions", _chat(model=7), "model"),
    ("missing messages", "/v1/chat/completions", _chat(messages=_DROP), "messages"),
    ("messages not a list", "/v1/chat/completions", _chat(messages="hi"), "messages"),
    ("empty messages", "/v1/chat/completions", _chat(messages=[]), "messages"),
    ("message not an object", "/v1/chat/completions", _chat(messages=["hi"]), "messages[0]"),
    (
        "bad role",
        "/v1/chat/completions",
        _chat(messages=[{"role": "x", "content": "hi"}]),
        "messages[0].role",
    ),
    (
        "content not text",
        "/v1/chat/completions",
        _chat(messages=[{"role": "user", "content": 5}]),
        "messages[0].content",
    ),
    ("n > 1", "/v1/chat/completions", _chat(n=2), "n"),
    ("stream not a bool", "/v1/chat/completions", _chat(stream="yes"), "stream"),
    ("max_tokens zero", "/v1/chat/completions", _chat(max_tokens=0), "max_tokens"),
    ("max_tokens string", "/v1/chat/completions", _chat(max_tokens="5"), "max_tokens"),
    ("temperature too high", "/v1/chat/completions", _chat(temperature=3), "temperature"),
    ("too many stops", "/v1/chat/completions", _chat(stop=list("abcde")), "stop"),
    ("missing prompt", "/v1/completions", {"model": MODEL}, "prompt"),
    ("prompt not text", "/v1/completions", {"model": MODEL, "prompt": 42}, "prompt"),
]


@pytest.mark.parametrize(
    ("path", "payload", "param"),
    [case[1:] for case in BAD_REQUESTS],
    ids=[case[0] for case in BAD_REQUESTS],
)
def test_malformed_requests_get_400_with_openai_error_shape(server, path, payload, param):
    raw = payload if isinstance(payload, bytes) else json.dumps(payload).encode()
    status, body = _request(server, "POST", path, raw=raw)
    assert status == 400
    error = body["error"]
    assert set(error) == {"message", "type", "param", "code"}
    assert error["type"] == "invalid_request_error"
    assert error["param"] == param
    assert isinstance(error["message"], str) and error["message"]


def test_unknown_model_is_404_model_not_found(server):
    status, body = _request(server, "POST", "/v1/chat/completions", _chat(model="other"))
    assert status == 404
    assert body["error"]["code"] == "model_not_found"
    assert body["error"]["param"] == "model"


def test_unknown_path_and_wrong_method(server):
    assert _request(server, "GET", "/v1/embeddings")[0] == 404
    assert _request(server, "GET", "/v1/chat/completions")[0] == 405


def test_text_content_parts_and_prompt_list_are_accepted(server):
    parts = [{"type": "text", "text": CONTENT}]
    status, body = _request(
        server, "POST", "/v1/chat/completions", _chat(messages=[{"role": "user", "content": parts}])
    )
    assert status == 200 and body["choices"][0]["message"]["content"] == " 123 ."
    status, body = _request(server, "POST", "/v1/completions", {**COMPLETION, "prompt": [CONTENT]})
    assert status == 200 and body["choices"][0]["text"] == " 123 ."


def test_bearer_token_check():
    with start_server(TaskLookupEngine(), api_key="s3cret") as server:
        status, body = _request(server, "POST", "/v1/chat/completions", CHAT)
        assert status == 401
        assert body["error"]["code"] == "invalid_api_key"
        assert "s3cret" not in json.dumps(body)
        bad = {"Authorization": "Bearer nope"}
        assert _request(server, "POST", "/v1/chat/completions", CHAT, headers=bad)[0] == 401
        good = {"Authorization": "Bearer s3cret"}
        assert _request(server, "POST", "/v1/chat/completions", CHAT, headers=good)[0] == 200


def test_context_length_exceeded():
    with start_server(TaskLookupEngine(max_context_tokens=10)) as server:
        status, body = _request(server, "POST", "/v1/chat/completions", CHAT)
    assert status == 400
    assert body["error"]["code"] == "context_length_exceeded"
    assert "maximum context length is 10 tokens" in body["error"]["message"]


def test_engine_failure_is_500_and_server_keeps_serving():
    class Broken(TaskLookupEngine):
        def generate(self, prompt, **kwargs):
            if "Bruno" in prompt:
                raise RuntimeError("boom")
            return super().generate(prompt, **kwargs)

    with start_server(Broken()) as server:
        bad = _chat(messages=[{"role": "user", "content": "What is the access code for Bruno ?"}])
        status, body = _request(server, "POST", "/v1/chat/completions", bad)
        assert status == 500
        assert body["error"]["type"] == "server_error" and "boom" in body["error"]["message"]
        assert _request(server, "POST", "/v1/chat/completions", CHAT)[0] == 200


def test_fault_hook_sees_requests_and_can_answer_or_delay():
    seen: list[RequestInfo] = []

    def faults(info: RequestInfo):
        seen.append(info)
        if info.index == 0:
            return Fault(
                status=503, body={"error": {"message": "busy"}}, headers={"Retry-After": "1"}
            )
        if info.index == 1:
            return Fault(delay_s=0.2)
        return None

    with start_server(TaskLookupEngine(), faults=faults) as server:
        assert _request(server, "POST", "/v1/chat/completions", CHAT) == (
            503,
            {"error": {"message": "busy"}},
        )
        start = time.monotonic()
        assert _request(server, "POST", "/v1/chat/completions", CHAT)[0] == 200
        assert time.monotonic() - start >= 0.2
        log = server.request_log
    assert [i.index for i in seen] == [0, 1]
    assert seen[0].body == CHAT and seen[0].path == "/v1/chat/completions"
    assert [(r.index, r.status) for r in log] == [(0, 503), (1, 200)]
    assert log[1].body == CHAT
    assert log[1].finished - log[1].started >= 0.2


def test_port_zero_reports_bound_port_and_close_releases_it():
    server = start_server(TaskLookupEngine())
    port = server.port
    assert port > 0
    assert server.base_url == f"http://127.0.0.1:{port}/v1"
    assert _request(server, "GET", "/v1/models")[0] == 200
    server.close()
    server.close()  # idempotent
    with pytest.raises(OSError), socket.create_connection(("127.0.0.1", port), timeout=1):
        pass


def test_request_log_keeps_the_latest_and_counts_all():
    with start_server(TaskLookupEngine(), request_log_limit=2) as server:
        for _ in range(3):
            _request(server, "GET", "/v1/models")
        assert [r.index for r in server.request_log] == [1, 2]
        assert server.requests_handled == 3


# --- hardening: what a hostile or broken client can make the server do -------------------

LIMITS = ServerLimits(
    max_body_bytes=64 * 1024, head_timeout_s=0.5, body_timeout_s=0.5, keep_alive_s=1
)


def _raw_exchange(server, data: bytes, *, timeout=5.0, then_wait=0.0) -> bytes:
    """Send raw bytes on a fresh socket; everything the server sends until it closes."""
    with socket.create_connection((server.host, server.port), timeout=timeout) as sock:
        sock.sendall(data)
        if then_wait:
            time.sleep(then_wait)
        chunks = []
        while True:
            try:
                chunk = sock.recv(65536)
            except (ConnectionResetError, TimeoutError):
                break
            if not chunk:
                break
            chunks.append(chunk)
            if b"\r\n\r\n" in b"".join(chunks) and _complete(b"".join(chunks)):
                break
        return b"".join(chunks)


def _complete(response: bytes) -> bool:
    head, _, body = response.partition(b"\r\n\r\n")
    for line in head.split(b"\r\n"):
        if line.lower().startswith(b"content-length:"):
            return len(body) >= int(line.split(b":")[1])
    return False


def _status_and_error(response: bytes):
    head, _, body = response.partition(b"\r\n\r\n")
    return int(head.split()[1]), json.loads(body)["error"]


@pytest.fixture()
def strict_server():
    with start_server(TaskLookupEngine(), api_key="k", limits=LIMITS) as running:
        yield running


def _post_head(length: int | None, *, auth=True, chunked=False) -> bytes:
    lines = [b"POST /v1/chat/completions HTTP/1.1", b"Host: x", b"Content-Type: application/json"]
    if auth:
        lines.append(b"Authorization: Bearer k")
    if chunked:
        lines.append(b"Transfer-Encoding: chunked")
    elif length is not None:
        lines.append(b"Content-Length: %d" % length)
    return b"\r\n".join(lines) + b"\r\n\r\n"


def test_authentication_comes_before_the_body_is_read(strict_server):
    # 50 MB announced, not one byte sent: the answer must not wait for the body.
    start = time.monotonic()
    response = _raw_exchange(strict_server, _post_head(50_000_000, auth=False))
    status, error = _status_and_error(response)
    assert (status, error["code"]) == (401, "invalid_api_key")
    assert time.monotonic() - start < 0.4  # well inside the body timeout
    assert b"connection: close" in response.lower()


def test_an_announced_oversized_body_is_refused_unread(strict_server):
    start = time.monotonic()
    status, error = _status_and_error(_raw_exchange(strict_server, _post_head(50_000_000)))
    assert status == 413 and "65536 bytes" in error["message"]
    assert time.monotonic() - start < 0.4


def test_a_streamed_body_is_capped_while_it_arrives(strict_server):
    chunk = b"x" * 16384
    stream = b"".join(b"%x\r\n%s\r\n" % (len(chunk), chunk) for _ in range(8))
    response = _raw_exchange(strict_server, _post_head(None, chunked=True) + stream)
    assert _status_and_error(response)[0] == 413


def test_a_body_that_never_arrives_times_out_with_408(strict_server):
    response = _raw_exchange(strict_server, _post_head(100) + b'{"mo')
    assert _status_and_error(response)[0] == 408


def test_a_silent_connection_is_closed(strict_server):
    start = time.monotonic()
    with socket.create_connection((strict_server.host, strict_server.port), timeout=5) as sock:
        assert sock.recv(1) == b""  # closed by the server, not by our timeout
    assert time.monotonic() - start < 3


def test_a_trickled_request_head_is_closed(strict_server):
    start = time.monotonic()
    closed = False
    with socket.create_connection((strict_server.host, strict_server.port), timeout=5) as sock:
        try:
            for byte in b"POST /v1/chat/completions HTTP/1.1\r\nHost: x\r\n" * 10:
                sock.sendall(bytes([byte]))
                time.sleep(0.02)
            closed = sock.recv(1) == b""
        except (BrokenPipeError, ConnectionResetError):
            closed = True
    assert closed
    assert time.monotonic() - start < 4


def test_an_idle_keep_alive_connection_is_closed(strict_server):
    conn = http.client.HTTPConnection(strict_server.host, strict_server.port, timeout=5)
    conn.request("GET", "/v1/models", headers={"Authorization": "Bearer k"})
    assert conn.getresponse().read()
    start = time.monotonic()
    assert conn.sock.recv(1) == b""
    assert time.monotonic() - start < 3
    conn.close()


HOSTILE_BODIES = [
    ("deep nesting", b'{"model": ' + b"[" * 100_000 + b"]" * 100_000 + b"}"),
    ("deep objects", b'{"a": ' + b'{"a": ' * 50_000 + b"1" + b"}" * 50_001),
    ("lone surrogate", b'{"model": "m", "messages": [{"role": "user", "content": "\\ud800"}]}'),
    ("surrogate key", b'{"\\udfff": 1}'),
    ("invalid utf-8", b'{"model": "\xff\xfe"}'),
    ("duplicate keys", b'{"model": "a", "model": "b"}'),
    ("NaN", b'{"model": "m", "temperature": NaN}'),
    ("Infinity", b'{"model": "m", "max_tokens": Infinity}'),
    ("huge integer", b'{"model": "m", "max_tokens": 1' + b"0" * 5000 + b"}"),
    ("string", b'"hello"'),
    ("null", b"null"),
    ("whitespace", b"   "),
]


@pytest.mark.parametrize("raw", [b for _, b in HOSTILE_BODIES], ids=[n for n, _ in HOSTILE_BODIES])
def test_hostile_bodies_get_400_openai_errors(server, raw):
    status, body = _request(server, "POST", "/v1/chat/completions", raw=raw)
    assert status == 400
    assert set(body["error"]) == {"message", "type", "param", "code"}
    assert body["error"]["type"] == "invalid_request_error"


def test_wrong_value_types_are_400_not_500(server):
    for changes in (
        {"temperature": "hot"},
        {"stop": [1]},
        {"messages": [{"role": "user", "content": [{"type": "image"}]}]},
        {"n": 1.5},
    ):
        status, _ = _request(server, "POST", "/v1/chat/completions", _chat(**changes))
        assert status in (400,), changes


def test_a_huge_max_tokens_meets_the_context_limit():
    with start_server(TaskLookupEngine(max_context_tokens=100)) as running:
        status, body = _request(running, "POST", "/v1/chat/completions", _chat(max_tokens=10**400))
    assert status == 400 and body["error"]["code"] == "context_length_exceeded"


def test_client_disconnects_leave_no_error_logs(caplog):
    import logging

    caplog.set_level(logging.DEBUG)
    with start_server(TaskLookupEngine(delay_s=0.3), limits=LIMITS) as running:
        # Gone mid-body, and gone while the engine works on the answer.
        with socket.create_connection((running.host, running.port)) as sock:
            sock.sendall(_post_head(500, auth=False) + b'{"model": ')
        data = json.dumps(CHAT).encode()
        with socket.create_connection((running.host, running.port)) as sock:
            sock.sendall(_post_head(len(data), auth=False) + data)
            time.sleep(0.05)
            sock.setsockopt(
                socket.SOL_SOCKET, socket.SO_LINGER, b"\x01\x00\x00\x00\x00\x00\x00\x00"
            )
        time.sleep(0.6)
        assert _request(running, "GET", "/v1/models")[0] == 200
    assert [r for r in caplog.records if r.levelno >= logging.WARNING] == []


def test_concurrent_requests_share_forward_passes():
    import concurrent.futures

    engine = BatchLookupEngine(delay_s=0.05)
    with start_server(engine) as running:

        def one(i):
            content = f"The access code for P{i} is {i} . What is the access code for P{i} ?"
            body = _chat(messages=[{"role": "user", "content": content}])
            return _request(running, "POST", "/v1/chat/completions", body)

        with concurrent.futures.ThreadPoolExecutor(16) as pool:
            answers = list(pool.map(one, range(32)))
    for i, (status, body) in enumerate(answers):
        assert status == 200
        assert body["choices"][0]["message"]["content"] == f" {i} ."  # each got its own answer
    assert sum(engine.batch_sizes) == 32
    assert max(engine.batch_sizes) >= 4
    assert len(engine.batch_sizes) < 32


def test_a_concurrent_burst_drops_nothing_and_answers_like_serial_requests():
    """What holds at any load: every request answered 200 with the same output as a serial
    one. (Throughput against concurrency is load-sensitive: benchmarks/server_load.py.)"""
    import concurrent.futures

    engine = BatchLookupEngine(delay_s=0.01)

    def run(running, n, concurrency):
        with concurrent.futures.ThreadPoolExecutor(concurrency) as pool:
            return list(
                pool.map(
                    lambda _: _request(running, "POST", "/v1/chat/completions", CHAT), range(n)
                )
            )

    with start_server(engine, request_log_limit=None) as running:
        serial = run(running, 8, 1)
        burst = run(running, 100, 32)
        assert running.requests_handled == 108
    for status, body in serial + burst:
        assert status == 200
        assert body["choices"][0]["message"] == serial[0][1]["choices"][0]["message"]
        assert body["usage"] == serial[0][1]["usage"]
    assert sum(engine.batch_sizes) == 108
