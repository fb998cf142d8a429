"""serve-reference under large bodies within the caps: the body scan equals its regex
oracle, prompts are tokenized in exact pieces and no further than the context, large
bodies hold a byte budget (429 + ``Retry-After`` in the OpenAI shape, which the official
client retries) and are paced. Latency beside such a client is measured, not asserted:
``benchmarks/server_abuse.py``."""

from __future__ import annotations

import http.client
import json
import re
import socket
import threading
import time

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from phaseaware.reference.admission import BodyPace
from phaseaware.reference.engine import ContextOverflow, text_pieces
from phaseaware.reference.openai_protocol import outside_strings
from phaseaware.reference.server import ServerLimits
from tests.support.fault_server import start_server
from tests.support.task_engine import BatchLookupEngine

MODEL = "phaseaware-task-lookup"
CHAT = [
    {"role": "user", "content": "The access code for Ana is 12 . What is the access code for Ana ?"}
]

# the scan this one replaces: a JSON string, the loop unrolled (the slow oracle)
_JSON_STRING = re.compile(rb'"[^"\\]*(?:\\.[^"\\]*)*"', re.DOTALL)

_text = st.text(alphabet=st.sampled_from('"\\ab{}[],:é\n\x00€😀'), max_size=12)
_json = st.recursive(
    st.none() | st.booleans() | st.integers() | _text,
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(_text, inner, max_size=4),
    max_leaves=20,
)


@settings(max_examples=400, deadline=None)
@given(_json, st.booleans())
def test_the_body_scan_removes_exactly_the_json_strings(value, ascii_only):
    raw = json.dumps({"v": value}, ensure_ascii=ascii_only).encode()
    assert outside_strings(raw) == _JSON_STRING.sub(b"", raw)


@settings(max_examples=200, deadline=None)
@given(st.text(alphabet=st.sampled_from("ab \t\n\x1c\x1f\x85\u3000\u2028é"), max_size=60),
       st.integers(1, 9))  # fmt: skip
def test_text_pieces_join_back_and_cut_only_before_whitespace(text, size):
    pieces = list(text_pieces(text, size))
    assert "".join(pieces) == text
    assert all(len(p) >= size for p in pieces[:-1])
    assert all(p[:1].isspace() and p[:1] not in "\x1c\x1d\x1e\x1f" for p in pieces[1:])


@pytest.fixture(scope="module")
def reference():
    pytest.importorskip("torch")
    from phaseaware.reference.load import load_reference

    return load_reference("cpu")


_WORDS = ["The", "access", "code", "for", "Ana", "is", "12", ".", "?", "zzqx", "<|user|>"]


@settings(max_examples=60, deadline=None)
@given(st.lists(st.sampled_from(_WORDS), max_size=40),
       st.lists(st.sampled_from([" ", "  ", "\t", "\n", "\u3000", "\x85", "\x1c"]), min_size=40,
                max_size=40),
       st.integers(1, 12))  # fmt: skip
def test_pieces_tokenize_like_the_whole_prompt(reference, words, spaces, size):
    """Pieces cut at whitespace give the whole text's tokens (chat and raw prompts)."""
    from phaseaware.reference.engine import ReferenceEngine

    content = "".join(w + s for w, s in zip(words, spaces, strict=False))
    whole = ReferenceEngine(*reference)
    pieces = ReferenceEngine(*reference, piece_chars=size)
    assert pieces.encode_prompt(content) == whole.encode(content)
    messages = [{"role": "user", "content": content}]
    assert pieces.encode_chat(messages) == whole.encode_chat(messages)


def test_a_prompt_past_the_context_is_not_tokenized_to_its_end(reference):
    """262,000 characters for a 512-token model: tokenizing stops after a piece or two."""
    from phaseaware.reference.engine import ReferenceEngine

    engine = ReferenceEngine(*reference)
    calls = []
    encode = engine.encode  # one call a piece: characters handed to the tokenizer
    engine.encode = lambda text: calls.append(len(text)) or encode(text)  # type: ignore[method-assign]
    with pytest.raises(ContextOverflow) as info:
        engine.encode_chat([{"role": "user", "content": "a " * 131_000}])
    assert info.value.limit == engine.max_context_tokens == 512
    assert 512 < info.value.tokens <= 512 + engine.piece_chars
    assert sum(calls) <= 2 * engine.piece_chars + 2  # not 262,000 characters
    with pytest.raises(ContextOverflow):
        engine.encode_prompt("b " * 131_000)


def test_the_server_answers_an_overflow_as_context_length_exceeded():
    openai = pytest.importorskip("openai")
    engine = BatchLookupEngine(max_context_tokens=20)
    with start_server(engine) as server:
        client = openai.OpenAI(base_url=server.base_url, api_key="x", max_retries=0)
        with pytest.raises(openai.BadRequestError) as info:
            client.chat.completions.create(
                model=MODEL, messages=[{"role": "user", "content": "a " * 100}], max_tokens=2
            )
    error = info.value.body
    assert isinstance(error, dict) and error["code"] == "context_length_exceeded"
    assert "maximum context length is 20 tokens" in error["message"]


def _tools(size: int) -> list[dict[str, object]]:
    """Tool schemas of about ``size`` bytes of JSON (this server ignores tools)."""
    per = 8192
    return [
        {"type": "function", "function": {"name": f"f{i}", "description": "x" * per,
                                          "parameters": {"type": "object"}}}
        for i in range(max(1, size // (per + 100)))
    ]  # fmt: skip


def test_seven_megabytes_of_tool_schemas_are_served():
    """Within the 8 MiB body cap: decoded off the event loop and answered 200."""
    openai = pytest.importorskip("openai")
    with start_server(BatchLookupEngine(), request_log_limit=0) as server:
        client = openai.OpenAI(base_url=server.base_url, api_key="x", max_retries=0)
        answer = client.chat.completions.create(
            model=MODEL, messages=CHAT, max_tokens=4, tools=_tools(7_000_000)
        )
    assert answer.choices[0].message.content == " 12 ."


def _hold_large_body(server, size: int) -> socket.socket:
    """A connection that announces ``size`` bytes and sends half of them."""
    sock = socket.create_connection((server.host, server.port))
    head = (
        f"POST /v1/chat/completions HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
        f"Content-Length: {size}\r\n\r\n"
    ).encode()
    sock.sendall(head + b" " * (size // 2))
    return sock


def _wait_held(server, n: int) -> None:
    budget = server._state.app._budget  # the app's budget: how many bytes large bodies hold
    deadline = time.monotonic() + 10
    while budget.held_bytes < n and time.monotonic() < deadline:
        time.sleep(0.01)
    assert budget.held_bytes >= n


def test_large_bodies_past_the_budget_get_429_with_retry_after_and_small_ones_pass():
    openai = pytest.importorskip("openai")
    limits = ServerLimits(large_body_bytes=64 * 1024, max_large_body_bytes=1024 * 1024)
    with start_server(BatchLookupEngine(), limits=limits, request_log_limit=0) as server:
        holder = _hold_large_body(server, 1024 * 1024)  # the whole budget, half sent
        try:
            _wait_held(server, 1024 * 1024)
            client = openai.OpenAI(base_url=server.base_url, api_key="x", max_retries=0)
            with pytest.raises(openai.RateLimitError) as info:
                client.chat.completions.create(
                    model=MODEL, messages=CHAT, max_tokens=4, tools=_tools(200_000)
                )
            small = client.chat.completions.create(model=MODEL, messages=CHAT, max_tokens=4)
        finally:
            holder.close()
        # the official client waits Retry-After and retries: served once the budget is back
        patient = openai.OpenAI(base_url=server.base_url, api_key="x", max_retries=3)
        served = patient.chat.completions.create(
            model=MODEL, messages=CHAT, max_tokens=4, tools=_tools(200_000)
        )
    response = info.value.response
    assert response.status_code == 429 and response.headers["retry-after"] == "1"
    error = response.json()["error"]
    assert error["code"] == "rate_limit_exceeded" and error["type"] == "requests"
    assert "at most 1048576 bytes of large bodies at once" in error["message"]
    assert small.choices[0].message.content == " 12 ."
    assert served.choices[0].message.content == " 12 ."


def test_a_refused_body_gives_its_bytes_back():
    """413, 400 and 429 answers all return what the request held of the budget."""
    limits = ServerLimits(large_body_bytes=1024, max_large_body_bytes=64 * 1024,
                          max_body_bytes=32 * 1024)  # fmt: skip
    bodies = [
        b"{" + b" " * 3000 + b"}",  # large, no model: 400
        json.dumps({"model": MODEL, "messages": CHAT, "pad": "x" * 40_000}).encode(),  # 413
        json.dumps({"model": MODEL, "messages": CHAT, "pad": "x" * 4000}).encode(),  # 200
    ]
    with start_server(BatchLookupEngine(), limits=limits, request_log_limit=0) as server:
        statuses = []
        for body in bodies * 3:
            conn = http.client.HTTPConnection(server.host, server.port, timeout=10)
            conn.request("POST", "/v1/chat/completions", body=body)
            statuses.append(conn.getresponse().status)
            conn.close()
        assert server._state.app._budget.held_bytes == 0
    assert statuses == [400, 413, 200] * 3


def test_the_pace_spends_bytes_and_says_how_long_to_wait():
    pace = BodyPace(1000, burst_bytes=2000)
    assert pace.delay(1500) == 0.0 and pace.delay(500) == 0.0  # the burst
    assert 0.9 < pace.delay(1000) <= 1.0  # one second of bytes owed
    assert 1.9 < pace.delay(1000) <= 2.0  # queued behind the first


def test_large_bodies_back_to_back_are_paced():
    """Bodies past the burst wait for the pace (a lower bound: sleeps never end early)."""
    limits = ServerLimits(large_body_bytes=16 * 1024, max_body_bytes=128 * 1024,
                          large_body_bytes_per_s=512 * 1024)  # burst 256 KiB  # fmt: skip
    body = json.dumps({"model": MODEL, "messages": CHAT, "pad": "x" * 120_000}).encode()
    with start_server(BatchLookupEngine(), limits=limits, request_log_limit=0) as server:
        started = time.monotonic()
        for _ in range(4):  # 480 KB: 2 in the burst, then ~0.23 s each
            conn = http.client.HTTPConnection(server.host, server.port, timeout=10)
            conn.request("POST", "/v1/chat/completions", body=body)
            assert conn.getresponse().status == 200
            conn.close()
        took = time.monotonic() - started
    assert took >= 0.4


def test_small_requests_are_answered_while_large_ones_queue():
    """Many large bodies at once: each is answered (200, or 429 past the budget), and
    small requests sent meanwhile are all answered 200."""
    limits = ServerLimits(large_body_bytes=16 * 1024, max_large_body_bytes=512 * 1024,
                          large_body_bytes_per_s=1024 * 1024)  # fmt: skip
    large = json.dumps({"model": MODEL, "messages": CHAT, "pad": "x" * 200_000}).encode()
    small = json.dumps({"model": MODEL, "messages": CHAT, "max_tokens": 4}).encode()

    def post(body: bytes, out: list[int]) -> None:
        conn = http.client.HTTPConnection(server.host, server.port, timeout=30)
        try:
            conn.request("POST", "/v1/chat/completions", body=body)
            out.append(conn.getresponse().status)
        except OSError:
            out.append(0)  # closed mid-body after a 429
        finally:
            conn.close()

    with start_server(BatchLookupEngine(), limits=limits, request_log_limit=0) as server:
        big: list[int] = []
        threads = [threading.Thread(target=post, args=(large, big)) for _ in range(12)]
        for t in threads:
            t.start()
        little: list[int] = []
        for _ in range(10):
            post(small, little)
        for t in threads:
            t.join()
    assert little == [200] * 10
    assert len(big) == 12 and set(big) <= {200, 429, 0} and 200 in big


def test_small_bodies_of_many_values_are_paced_by_their_cost():
    """A 10 KB body of 3,000 values costs the CPU of ~1.5 MB: paced like one."""
    from phaseaware.reference.admission import VALUE_COST_BYTES

    limits = ServerLimits(large_body_values=1000, max_body_bytes=64 * 1024,
                          large_body_bytes_per_s=4 * 1024 * 1024)  # burst 128 KiB  # fmt: skip
    body = json.dumps({"model": MODEL, "messages": CHAT, "x": [[1]] * 1500}).encode()
    assert len(body) < 16 * 1024 and 3000 * VALUE_COST_BYTES > 1_500_000
    with start_server(BatchLookupEngine(), limits=limits, request_log_limit=0) as server:
        started = time.monotonic()
        for _ in range(3):  # ~1.5 MB of cost each at 4 MiB/s: ~0.37 s each past the burst
            conn = http.client.HTTPConnection(server.host, server.port, timeout=10)
            conn.request("POST", "/v1/chat/completions", body=body)
            assert conn.getresponse().status == 200
            conn.close()
        took = time.monotonic() - started
    assert took >= 0.6


def test_a_full_pace_queue_answers_429_and_spends_nothing():
    import asyncio

    from phaseaware.reference.admission import MAX_WAIT_S
    from phaseaware.reference.openai_protocol import RequestError

    pace = BodyPace(1000, burst_bytes=0)
    with pytest.raises(RequestError) as info:
        asyncio.run(pace.wait(int(1000 * (MAX_WAIT_S + 2.5))))
    assert info.value.status == 429 and info.value.retry_after_s == 3
    assert "wait at most 5 s for their turn" in info.value.message
    assert pace.delay(0) < 0.1  # the refused bytes were given back


def test_a_row_admitted_mid_batch_ends_first_and_equals_its_request_alone(reference):
    """Continuous batching in the engine: a short row joins a long generation at a step
    boundary, is reported as soon as it ends, and gets exactly what it gets alone."""
    from phaseaware.reference.engine import GenerationRequest, ReferenceEngine

    engine = ReferenceEngine(*reference)
    long = GenerationRequest(tuple(engine.encode_chat([{"role": "user", "content": "hello"}])), 60)
    short = GenerationRequest(tuple(engine.encode_chat(CHAT)), 4)
    steps, order = [0], []

    def admit():
        steps[0] += 1
        return [short] if steps[0] == 5 else []

    def done(request, result):
        order.append((request is short, result, steps[0]))

    (long_result,) = engine.generate_batch([long], admit=admit, done=done)
    assert [o[0] for o in order] == [True, False]  # the short row ended first
    assert order[0][2] < order[1][2] and long_result.completion_tokens == 60
    assert order[0][1] == engine.generate_batch([short])[0]
    assert order[1][1] == long_result == engine.generate_batch([long])[0]


def test_a_short_request_is_answered_while_a_long_generation_runs(reference):
    """On the real server with the official client: a 400-token generation does not hold
    back a short request sent after it started."""
    openai = pytest.importorskip("openai")
    from phaseaware.reference.engine import ReferenceEngine

    engine = ReferenceEngine(*reference)
    with start_server(engine, request_log_limit=0) as server:
        client = openai.OpenAI(base_url=server.base_url, api_key="x", max_retries=0)
        batcher = server._state.app._batcher
        answers: list[object] = []

        def long_generation() -> None:
            answers.append(client.chat.completions.create(
                model=engine.model_name, max_tokens=400,
                messages=[{"role": "user", "content": "hello"}]))  # fmt: skip

        worker = threading.Thread(target=long_generation)
        worker.start()
        deadline = time.monotonic() + 30
        while not batcher._running and time.monotonic() < deadline:
            time.sleep(0.005)
        short = client.chat.completions.create(model=engine.model_name, max_tokens=4,
                                               messages=CHAT)  # fmt: skip
        still_running = worker.is_alive()
        worker.join()
    assert short.choices[0].message.content is not None
    assert still_running  # answered before the long generation ended
    assert answers and answers[0].usage.completion_tokens == 400  # type: ignore[attr-defined]
