"""The stdlib OpenAI-compatible server: shapes, validation, auth, faults, request log."""

from __future__ import annotations

import http.client
import json
import socket
import time

import pytest

from tests.support.fault_server import Fault, RequestInfo, start_server
from tests.support.task_engine import TaskLookupEngine

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
    ("stream", "/v1/chat/completions", _chat(stream=True), "stream"),
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
