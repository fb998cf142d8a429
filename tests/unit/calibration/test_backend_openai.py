"""OpenAIBackend against the real stdlib server over loopback, with the real openai client.

The engine is a test double for the model (it looks the answer up in the
prompt); HTTP, the openai client, retries and error mapping are all real.
"""

from __future__ import annotations

import socket
import subprocess
import sys
import time

import numpy as np
import pytest

from phaseaware.calibration.backends.base import Backend, ProbeRequest
from phaseaware.calibration.backends.openai import OpenAIBackend
from phaseaware.calibration.task import (
    NAMES,
    extract_answer,
    filler_sentence,
    question_text,
    record_text,
)
from phaseaware.errors import BackendError
from tests.support.fault_server import Fault, start_server
from tests.support.task_engine import TaskLookupEngine, simple_chat_template, word_count

MODEL = "phaseaware-task-lookup"


def make_probe(index: int, *, pad: int = 0, chat: bool = True, seed: int = 0) -> ProbeRequest:
    """A probe whose answer depends on ``index``; ``pad`` filler sentences before the record."""
    rng = np.random.default_rng(seed + index)
    name, number = NAMES[index % len(NAMES)], str(100 + index)
    filler = [filler_sentence(rng) for _ in range(pad)]
    content = " ".join([*filler, record_text(name, number), question_text(name)])
    messages = ({"role": "user", "content": content},) if chat else None
    prompt = simple_chat_template(messages) if chat else f"<bos> {content}"
    return ProbeRequest(
        probe_id=f"p{index:03d}-pad{pad}",
        prompt=prompt,
        prompt_tokens=word_count(prompt),
        answer=number,
        messages=messages,
        max_tokens=4,
    )


class Arrivals:
    """A fault hook wrapper that records when each request reached the server."""

    def __init__(self, faults) -> None:
        self.times: list[float] = []
        self._faults = faults

    def __call__(self, info):
        self.times.append(time.monotonic())
        return self._faults(info)

    @property
    def gaps(self) -> list[float]:
        return [b - a for a, b in zip(self.times, self.times[1:], strict=False)]


def backend(server, **options) -> OpenAIBackend:
    options.setdefault("timeout", 5.0)
    return OpenAIBackend(server.base_url, MODEL, **options)


def answers(completions) -> dict[str, str | None]:
    return {c.probe_id: extract_answer(c.text) for c in completions}


def test_is_a_backend():
    with start_server(TaskLookupEngine()) as server, backend(server) as b:
        assert isinstance(b, Backend)


@pytest.mark.parametrize("endpoint", ["chat", "completions"])
def test_happy_path_returns_every_answer_with_server_usage(endpoint):
    group = [make_probe(i, pad=i % 3, chat=endpoint == "chat") for i in range(6)]
    with start_server(TaskLookupEngine()) as server, backend(server, endpoint=endpoint) as b:
        completions = list(b.complete(group))
        log = server.request_log
    assert answers(completions) == {r.probe_id: r.answer for r in group}
    by_id = {c.probe_id: c for c in completions}
    assert all(by_id[r.probe_id].reported_prompt_tokens == r.prompt_tokens for r in group)
    path = "/v1/chat/completions" if endpoint == "chat" else "/v1/completions"
    assert {r.path for r in log} == {path}
    sent = log[0].body
    assert sent["temperature"] == 0 and sent["max_tokens"] == 4 and sent["model"] == MODEL
    if endpoint == "chat":
        sent_messages = sorted(r.body["messages"][0]["content"] for r in log)
        assert sent_messages == sorted(r.messages[0]["content"] for r in group)
        assert all(len(r.body["messages"]) == 1 for r in log)
    else:
        assert sorted(r.body["prompt"] for r in log) == sorted(r.prompt for r in group)


def test_prompt_token_mismatch_names_both_counts():
    probe = make_probe(1)
    wrong = ProbeRequest(**{**probe.__dict__, "prompt_tokens": probe.prompt_tokens - 2})
    with (
        start_server(TaskLookupEngine()) as server,
        backend(server) as b,
        pytest.raises(BackendError) as info,
    ):
        list(b.complete([wrong]))
    message = str(info.value)
    assert f"server counted {probe.prompt_tokens}" in message
    assert f"phaseaware counted {probe.prompt_tokens - 2}" in message
    assert "--tokenizer" in message and "--chat-format" in message


def test_prompt_token_offset_for_servers_that_add_bos():
    engine = TaskLookupEngine(count_tokens=lambda p: word_count(p) + 1)
    probe = make_probe(2)
    with start_server(engine) as server:
        with backend(server) as strict, pytest.raises(BackendError, match="--prompt-token-offset"):
            list(strict.complete([probe]))
        with backend(server, prompt_token_offset=1) as shifted:
            (completion,) = shifted.complete([probe])
        with backend(server, expected_prompt_tokens_check=False) as unchecked:
            (unchecked_completion,) = unchecked.complete([probe])
    assert completion.reported_prompt_tokens == probe.prompt_tokens + 1
    assert extract_answer(completion.text) == probe.answer
    assert extract_answer(unchecked_completion.text) == probe.answer


def test_429_and_500_are_retried_with_backoff():
    def faults(info):
        if info.index == 0:
            return Fault(status=429, body={"error": {"message": "slow down", "type": "rate_limit"}})
        if info.index == 1:
            return Fault(status=500, body={"error": {"message": "oops", "type": "server_error"}})
        return None

    arrivals = Arrivals(faults)
    probe = make_probe(3)
    with start_server(TaskLookupEngine(), faults=arrivals) as server:
        with backend(server, max_retries=5) as b:
            (completion,) = b.complete([probe])
            assert b.retry_count == 2
        statuses = [r.status for r in server.request_log]
    assert statuses == [429, 500, 200]
    assert extract_answer(completion.text) == probe.answer
    # the client backs off before each retry (0.5 s, then 1 s, each with jitter)
    assert len(arrivals.gaps) == 2 and min(arrivals.gaps) >= 0.3


def test_retry_after_header_is_honoured():
    def faults(info):
        if info.index == 0:
            return Fault(
                status=429, body={"error": {"message": "wait"}}, headers={"Retry-After": "1.5"}
            )
        return None

    arrivals = Arrivals(faults)
    with (
        start_server(TaskLookupEngine(), faults=arrivals) as server,
        backend(server) as b,
    ):
        (completion,) = b.complete([make_probe(4)])
        assert b.retry_count == 1
    assert extract_answer(completion.text) == make_probe(4).answer
    # the server asked for 1.5 s, longer than the client's own first backoff (<= 0.5 s)
    assert len(arrivals.gaps) == 1 and arrivals.gaps[0] >= 1.45


def test_retries_exhausted_reports_attempts_and_status():
    always = lambda info: Fault(status=503, body={"error": {"message": "overloaded"}})  # noqa: E731
    with start_server(TaskLookupEngine(), faults=always) as server:
        with backend(server, max_retries=2) as b, pytest.raises(BackendError) as info:
            list(b.complete([make_probe(5)]))
        assert len(server.request_log) == 3
    assert "HTTP 503" in str(info.value) and "after 3 attempts" in str(info.value)
    assert "overloaded" in str(info.value)


def test_timeout_is_retried():
    def faults(info):
        return Fault(delay_s=2.0) if info.index == 0 else None

    probe = make_probe(6)
    with (
        start_server(TaskLookupEngine(), faults=faults) as server,
        backend(server, timeout=0.3) as b,
    ):
        start = time.monotonic()
        (completion,) = b.complete([probe])
        elapsed = time.monotonic() - start
        assert b.retry_count == 1
    assert extract_answer(completion.text) == probe.answer
    assert elapsed < 1.8  # gave up on the slow attempt instead of waiting it out


def test_timeouts_exhausted_name_timeout_flag():
    with (
        start_server(TaskLookupEngine(), faults=lambda info: Fault(delay_s=0.6)) as server,
        backend(server, timeout=0.2, max_retries=1) as b,
        pytest.raises(BackendError) as info,
    ):
        list(b.complete([make_probe(7)]))
    assert "timed out" in str(info.value) and "--timeout" in str(info.value)


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def test_unreachable_server_names_base_url():
    url = f"http://127.0.0.1:{_free_port()}/v1"
    with OpenAIBackend(url, MODEL, max_retries=2, timeout=2) as b:
        with pytest.raises(BackendError) as info:
            list(b.complete([make_probe(8)]))
        assert b.retry_count == 2
    message = str(info.value)
    assert "--base-url" in message and url in message and "after 3 attempts" in message


def test_rejected_key_names_env_var_and_never_shows_the_key(monkeypatch):
    secret = "sk-test-DO-NOT-PRINT-1234567890"
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    monkeypatch.setenv("PHASEAWARE_API_KEY", secret)
    with start_server(TaskLookupEngine(), api_key="the-right-key") as server:
        with backend(server) as b:
            assert secret not in repr(b) and secret not in str(vars(b))
            with pytest.raises(BackendError) as info:
                list(b.complete([make_probe(9)]))
        assert len(server.request_log) == 1  # auth failures are not retried
    message = str(info.value)
    assert "PHASEAWARE_API_KEY" in message and "401" in message
    assert secret not in message and secret not in repr(info.value)


def test_key_echoed_by_server_is_redacted(monkeypatch):
    secret = "sk-echoed-secret-0987654321"
    monkeypatch.delenv("PHASEAWARE_API_KEY", raising=False)
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    body = {"error": {"message": f"quota exceeded for key {secret}", "type": "x"}}
    with (
        start_server(
            TaskLookupEngine(), faults=lambda info: Fault(status=402, body=body)
        ) as server,
        backend(server, api_key=secret) as b,
        pytest.raises(BackendError) as info,
    ):
        list(b.complete([make_probe(10)]))
    assert "HTTP 402" in str(info.value) and secret not in str(info.value)


def test_key_falls_back_to_openai_api_key(monkeypatch):
    monkeypatch.delenv("PHASEAWARE_API_KEY", raising=False)
    monkeypatch.setenv("OPENAI_API_KEY", "the-right-key")
    probe = make_probe(11)
    with (
        start_server(TaskLookupEngine(), api_key="the-right-key") as server,
        backend(server) as b,
    ):
        (completion,) = b.complete([probe])
    assert extract_answer(completion.text) == probe.answer


def test_missing_key_says_which_env_var_to_set(monkeypatch):
    monkeypatch.delenv("PHASEAWARE_API_KEY", raising=False)
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    with (
        start_server(TaskLookupEngine(), api_key="k") as server,
        backend(server) as b,
        pytest.raises(BackendError, match="no API key is set"),
    ):
        list(b.complete([make_probe(12)]))


def test_unknown_model_names_model_flag():
    with start_server(TaskLookupEngine()) as server:
        b = OpenAIBackend(server.base_url, "no-such-model")
        with b, pytest.raises(BackendError) as info:
            list(b.complete([make_probe(13)]))
        assert len(server.request_log) == 1
    assert "--model" in str(info.value) and "no-such-model" in str(info.value)


def test_wrong_path_names_base_url():
    with start_server(TaskLookupEngine()) as server:
        url = server.base_url.removesuffix("/v1") + "/api"
        with OpenAIBackend(url, MODEL) as b, pytest.raises(BackendError) as info:
            list(b.complete([make_probe(14)]))
    assert "--base-url" in str(info.value) and "/v1" in str(info.value)


def test_context_length_exceeded_names_context_tokens_flag():
    with start_server(TaskLookupEngine(max_context_tokens=20)) as server:
        with backend(server) as b, pytest.raises(BackendError) as info:
            list(b.complete([make_probe(15, pad=3)]))
        assert len(server.request_log) == 1
    assert "--context-tokens" in str(info.value)


def test_chat_endpoint_needs_messages():
    with start_server(TaskLookupEngine()) as server, backend(server) as b:
        with pytest.raises(BackendError, match="--endpoint completions"):
            list(b.complete([make_probe(16, chat=False)]))
        assert server.request_log == []


def test_concurrency_is_bounded_and_used():
    engine = TaskLookupEngine(delay_s=0.05)
    group = [make_probe(i) for i in range(12)]
    with start_server(engine, engine_parallelism=None) as server:
        with backend(server, concurrency=3) as b:
            completions = list(b.complete(group))
        assert server.max_in_flight <= 3
    assert 2 <= engine.max_in_flight <= 3
    assert answers(completions) == {r.probe_id: r.answer for r in group}


def test_variants_of_a_group_arrive_in_order():
    groups = [[make_probe(i, pad=pad) for pad in range(4)] for i in range(3)]
    with start_server(TaskLookupEngine()) as server, backend(server, concurrency=1) as b:
        for group in groups:
            list(b.complete(group))
        arrived = [r.body["messages"][0]["content"] for r in server.request_log]
    assert arrived == [r.messages[0]["content"] for group in groups for r in group]


def test_groups_do_not_interleave_with_concurrency():
    groups = [[make_probe(i, pad=pad) for pad in range(4)] for i in range(3)]
    with start_server(TaskLookupEngine(delay_s=0.01)) as server, backend(server) as b:
        for group in groups:
            list(b.complete(group))
        arrived = [r.body["messages"][0]["content"] for r in server.request_log]
    for k, group in enumerate(groups):
        assert sorted(arrived[4 * k : 4 * k + 4]) == sorted(r.messages[0]["content"] for r in group)


def test_abandoning_a_group_cancels_requests_not_started():
    engine = TaskLookupEngine(delay_s=0.05)
    group = [make_probe(i) for i in range(10)]
    with start_server(engine) as server, backend(server, concurrency=1) as b:
        stream = b.complete(group)
        first = next(stream)
        stream.close()
        time.sleep(0.2)
        sent = len(server.request_log)
    by_id = {r.probe_id: r for r in group}
    assert extract_answer(first.text) == by_id[first.probe_id].answer
    assert sent <= 3  # the first, at most one running and one racing the cancel


@pytest.mark.parametrize(
    ("options", "flag"),
    [
        ({"base_url": "localhost:8000"}, "--base-url"),
        ({"model": ""}, "--model"),
        ({"endpoint": "responses"}, "--endpoint"),
        ({"concurrency": 0}, "--concurrency"),
        ({"max_retries": -1}, "--max-retries"),
        ({"timeout": 0}, "--timeout"),
    ],
)
def test_bad_settings_name_the_flag(options, flag):
    settings = {"base_url": "http://127.0.0.1:1/v1", "model": MODEL, **options}
    with pytest.raises(BackendError, match=flag):
        OpenAIBackend(settings.pop("base_url"), settings.pop("model"), **settings)


def test_closed_backend_refuses_work():
    with start_server(TaskLookupEngine()) as server:
        b = backend(server)
        b.close()
        b.close()
        with pytest.raises(BackendError, match="closed"):
            list(b.complete([make_probe(0)]))


def test_importing_http_modules_does_not_import_openai():
    code = (
        "import sys\n"
        "import phaseaware.calibration.backends.openai\n"
        "import phaseaware.calibration.backends.batch\n"
        "import phaseaware.reference.server, tests.support.fault_server, tests.support.task_engine\n"
        "assert 'openai' not in sys.modules, 'openai imported'\n"
        "assert 'torch' not in sys.modules\n"
    )
    subprocess.run([sys.executable, "-c", code], check=True)


def test_completions_finished_before_a_failure_are_yielded():
    def faults(info):
        content = info.body["messages"][0]["content"] if info.body else ""
        if "Bruno" in content:
            return Fault(status=400, body={"error": {"message": "rejected", "type": "x"}})
        if "Carla" in content:  # the one worker takes Carla up as soon as Bruno fails: keep
            return Fault(delay_s=1.0)  # her in flight until the failure is seen (no race)
        return None

    group = [make_probe(i) for i in range(3)]  # Alice, Bruno, Carla
    got = []
    with (
        start_server(TaskLookupEngine(), faults=faults) as server,
        backend(server, concurrency=1) as b,
        pytest.raises(BackendError, match="HTTP 400"),
    ):
        for completion in b.complete(group):
            got.append(completion.probe_id)
    assert got == [group[0].probe_id]
