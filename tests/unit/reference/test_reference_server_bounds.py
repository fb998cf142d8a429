"""serve-reference under abuse: bounded requests (4xx), work dropped when the client
leaves, a prompt exit on SIGTERM, and chat encoding that matches the template's text.

Speed against message count and latency under abuse are measured, not asserted:
``benchmarks/server_abuse.py``."""

from __future__ import annotations

import http.client
import json
import os
import signal
import socket
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest

from phaseaware.reference.server import ServerLimits
from tests.support.fault_server import start_server
from tests.support.task_engine import BatchLookupEngine, TaskLookupEngine

MODEL = "phaseaware-task-lookup"
ROOT = Path(__file__).resolve().parents[3]


def _post(server, path: str, body: object, *, timeout: float = 30) -> tuple[int, dict]:
    conn = http.client.HTTPConnection(server.host, server.port, timeout=timeout)
    try:
        data = body if isinstance(body, bytes) else json.dumps(body).encode()
        conn.request("POST", path, body=data, headers={"Content-Type": "application/json"})
        response = conn.getresponse()
        return response.status, json.loads(response.read() or b"null")
    finally:
        conn.close()


def _chat(n: int, content: str = "hi") -> dict:
    return {
        "model": MODEL,
        "max_tokens": 2,
        "messages": [{"role": "user", "content": content} for _ in range(n)],
    }


def test_message_count_is_bounded_with_a_400() -> None:
    limits = ServerLimits(max_messages=8)
    with start_server(TaskLookupEngine(), limits=limits) as server:
        assert _post(server, "/v1/chat/completions", _chat(8))[0] == 200
        status, doc = _post(server, "/v1/chat/completions", _chat(9))
    assert status == 400
    assert doc["error"]["param"] == "messages" and doc["error"]["code"] == "too_many_messages"
    assert "holds 9 messages; this server takes at most 8" in doc["error"]["message"]


def test_prompt_length_is_bounded_with_a_400() -> None:
    limits = ServerLimits(max_prompt_chars=100)
    with start_server(TaskLookupEngine(), limits=limits) as server:
        assert _post(server, "/v1/chat/completions", _chat(2, "x" * 50))[0] == 200
        status, doc = _post(server, "/v1/chat/completions", _chat(3, "x" * 50))
        assert status == 400 and doc["error"]["code"] == "context_length_exceeded"
        assert "hold 150 characters; this server takes at most 100" in doc["error"]["message"]
        body = {"model": MODEL, "prompt": "y" * 101, "max_tokens": 2}
        status, doc = _post(server, "/v1/completions", body)
    assert status == 400 and doc["error"]["param"] == "prompt"


def test_a_quarter_million_empty_messages_under_the_body_cap_are_refused() -> None:
    """The abusive body of the report: 250,000 empty messages, under the 8 MiB cap."""
    engine = BatchLookupEngine()
    raw = json.dumps(_chat(250_000, ""), separators=(",", ":")).encode()
    assert len(raw) < ServerLimits().max_body_bytes
    with start_server(engine) as server:
        status, doc = _post(server, "/v1/chat/completions", raw)
        assert status == 400, doc  # counted before decoding: no 250,000 Python objects
        assert "at least 500002 values; this server takes at most 16384" in doc["error"]["message"]
        assert engine.batch_sizes == [] and engine.prompts == []  # nothing was encoded or run
        assert _post(server, "/v1/chat/completions", _chat(1))[0] == 200


def test_the_value_count_is_exact_where_the_cheap_bound_cannot_tell() -> None:
    """Quotes and commas inside strings are no values: a long quoted content is served,
    as many values outside strings are refused."""
    from phaseaware.reference.openai_protocol import RequestError, decode_json_body

    quoted = json.dumps({"messages": [{"content": 'say "a", "b", \\ ' * 5000}]}).encode()
    assert decode_json_body(quoted, max_items=100)["messages"][0]["content"].count('"') == 20000
    many = json.dumps({"x": [1] * 101}).encode()
    with pytest.raises(RequestError, match="about 102 values; this server takes at most 100"):
        decode_json_body(many, max_items=100)


def _post_head(length: int) -> bytes:
    return (
        f"POST /v1/chat/completions HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
        f"Content-Length: {length}\r\n\r\n"
    ).encode()


def test_engine_work_stops_when_the_client_disconnects() -> None:
    engine = BatchLookupEngine(delay_s=0.05, steps=400)  # 20 s of "generation" per batch
    with start_server(engine) as server:
        data = json.dumps(_chat(1)).encode()
        with socket.create_connection((server.host, server.port)) as sock:
            sock.sendall(_post_head(len(data)) + data)
            deadline = time.monotonic() + 10
            while not engine.batch_sizes and time.monotonic() < deadline:
                time.sleep(0.01)
            assert engine.batch_sizes == [1]  # the generation is running
        deadline = time.monotonic() + 10
        while engine.cancelled_calls == 0 and time.monotonic() < deadline:
            time.sleep(0.02)
        assert engine.cancelled_calls == 1  # dropped, not run to its end
        conn = http.client.HTTPConnection(server.host, server.port, timeout=10)
        conn.request("GET", "/v1/models")
        assert conn.getresponse().status == 200  # still serving
        conn.close()
    assert server.request_log[0].status == 499  # the client left before its answer


def test_a_cancelled_row_leaves_the_reference_batch() -> None:
    """The real engine drops a cancelled row at its next step (no tokens for it)."""
    pytest.importorskip("torch")
    from phaseaware.reference.engine import GenerationRequest, ReferenceEngine
    from phaseaware.reference.load import load_reference

    engine = ReferenceEngine(*load_reference("cpu"))
    messages = [{"role": "user", "content": "The access code for Ana is 12 ."}] * 3
    ids = tuple(engine.encode_chat(messages))
    assert list(ids) == engine.encode(engine.render_chat(messages))  # one pass, same tokens
    gone, kept = threading.Event(), threading.Event()
    gone.set()
    results = engine.generate_batch(
        [GenerationRequest(ids, 50, cancel=gone), GenerationRequest(ids, 3, cancel=kept)]
    )
    assert results[0].completion_tokens == 0 and results[1].completion_tokens == 3


SERVE = [sys.executable, "-m", "phaseaware", "serve-reference", "--port", "0"]


def test_sigterm_stops_a_busy_server_promptly() -> None:
    pytest.importorskip("torch")
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(sys.path)}
    env.pop("PHASEAWARE_SERVER_API_KEY", None)
    proc = subprocess.Popen(SERVE, stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=env)
    try:
        assert proc.stdout is not None
        line = proc.stdout.readline().decode()
        assert "serving" in line, line + proc.stderr.read().decode() if proc.stderr else line
        port = int(line.split("/v1")[0].rsplit(":", 1)[1])
        body = json.dumps({
            "model": "phaseaware-reference", "max_tokens": 480,
            "messages": [{"role": "user", "content": "The access code for Ana is 12 ."}],
        }).encode()  # fmt: skip

        def busy() -> None:
            try:
                conn = http.client.HTTPConnection("127.0.0.1", port, timeout=60)
                conn.request("POST", "/v1/chat/completions", body=body,
                             headers={"Content-Type": "application/json"})  # fmt: skip
                conn.getresponse().read()
            except OSError:
                pass

        clients = [threading.Thread(target=busy, daemon=True) for _ in range(24)]
        for client in clients:
            client.start()
        time.sleep(1.0)  # the batch of long generations is running
        started = time.monotonic()
        proc.send_signal(signal.SIGTERM)
        proc.wait(timeout=30)
        took = time.monotonic() - started
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    grace = ServerLimits().shutdown_grace_s
    print(f"SIGTERM took {took:.1f} s")
    assert took < grace + 3.0, f"SIGTERM took {took:.1f} s"


def test_other_clients_are_served_while_an_abusive_one_is_refused() -> None:
    """What holds at any load (latency is measured in benchmarks/server_abuse.py): every
    well-behaved request is answered 200 while an abusive client floods the server, and
    every abusive request is refused with a 400."""
    engine = BatchLookupEngine()
    many = json.dumps(_chat(250_000, ""), separators=(",", ":")).encode()
    huge = json.dumps(_chat(1, "a " * 200_000)).encode()
    abusive: list[int] = []
    with start_server(engine, limits=ServerLimits(max_prompt_chars=100_000)) as server:
        stop = threading.Event()

        def abuse() -> None:
            i = 0
            while not stop.is_set():
                abusive.append(_post(server, "/v1/chat/completions", (many, huge)[i % 2])[0])
                i += 1

        flood = threading.Thread(target=abuse)
        flood.start()
        try:
            good = [_post(server, "/v1/chat/completions", _chat(1))[0] for _ in range(10)]
        finally:
            stop.set()
            flood.join()
    assert good == [200] * 10
    assert abusive and set(abusive) == {400}
    assert all(size == 1 for size in engine.batch_sizes)  # nothing abusive reached the engine
