"""Batch files: emit JSONL, run it through the real server (a mini run-batch), ingest."""

from __future__ import annotations

import json
import urllib.request
from pathlib import Path

import numpy as np
import pytest

from phaseaware.calibration.backends.base import Completion, ProbeRequest
from phaseaware.calibration.backends.batch import (
    BatchLineError,
    emit_batch,
    ingest_batch,
    read_batch_results,
)
from phaseaware.calibration.task import NAMES, extract_answer, question_text, record_text
from phaseaware.errors import BackendError, InputError
from tests.support.fault_server import start_server
from tests.support.task_engine import TaskLookupEngine, simple_chat_template, word_count

MODEL = "phaseaware-task-lookup"


def make_probe(index: int, *, chat: bool = True) -> ProbeRequest:
    name, number = NAMES[index % len(NAMES)], str(200 + index)
    content = f"{record_text(name, number)} {question_text(name)}"
    messages = ({"role": "user", "content": content},) if chat else None
    prompt = simple_chat_template(messages) if chat else f"<bos> {content}"
    return ProbeRequest(f"probe-{index}", prompt, word_count(prompt), number, messages, 4)


def run_batch(input_path: Path, output_path: Path, server, *, seed: int = 0) -> None:
    """What ``vllm run-batch`` / the Batch API do, through the real HTTP server; lines shuffled."""
    lines = []
    for number, raw in enumerate(input_path.read_text().splitlines()):
        item = json.loads(raw)
        url = server.base_url.removesuffix("/v1") + item["url"]
        request = urllib.request.Request(
            url,
            data=json.dumps(item["body"]).encode(),
            headers={"Content-Type": "application/json"},
        )
        with urllib.request.urlopen(request, timeout=5) as response:
            body = json.loads(response.read())
            status = response.status
        lines.append(
            {
                "id": f"batch_req_{number}",
                "custom_id": item["custom_id"],
                "response": {"status_code": status, "request_id": f"req-{number}", "body": body},
                "error": None,
            }
        )
    order = np.random.default_rng(seed).permutation(len(lines))
    output_path.write_text("".join(json.dumps(lines[i]) + "\n" for i in order))


@pytest.mark.parametrize("endpoint", ["chat", "completions"])
def test_emit_writes_batch_request_lines(tmp_path, endpoint):
    probes = [make_probe(i, chat=endpoint == "chat") for i in range(3)]
    path = tmp_path / "batch.jsonl"
    assert emit_batch(probes, path, model=MODEL, endpoint=endpoint) == 3
    items = [json.loads(line) for line in path.read_text().splitlines()]
    assert [i["custom_id"] for i in items] == [p.probe_id for p in probes]
    url = "/v1/chat/completions" if endpoint == "chat" else "/v1/completions"
    for item, probe in zip(items, probes, strict=True):
        assert set(item) == {"custom_id", "method", "url", "body"}
        assert item["method"] == "POST" and item["url"] == url
        expected = {"model": MODEL, "max_tokens": 4, "temperature": 0}
        if endpoint == "chat":
            expected["messages"] = [dict(m) for m in probe.messages]
        else:
            expected["prompt"] = probe.prompt
        assert item["body"] == expected
    assert [p.name for p in tmp_path.iterdir()] == ["batch.jsonl"]  # no temp file left


def test_emit_rejects_duplicates_and_missing_messages(tmp_path):
    path = tmp_path / "batch.jsonl"
    with pytest.raises(InputError, match="unique"):
        emit_batch([make_probe(1), make_probe(1)], path, model=MODEL)
    with pytest.raises(BackendError, match="--endpoint completions"):
        emit_batch([make_probe(2, chat=False)], path, model=MODEL, endpoint="chat")
    with pytest.raises(BackendError, match="--endpoint"):
        emit_batch([make_probe(2)], path, model=MODEL, endpoint="embeddings")
    assert not path.exists()  # a failed emit leaves no file behind


def test_emit_replaces_an_existing_file_whole(tmp_path):
    path = tmp_path / "batch.jsonl"
    emit_batch([make_probe(i) for i in range(5)], path, model=MODEL)
    emit_batch([make_probe(7)], path, model=MODEL)
    assert [json.loads(x)["custom_id"] for x in path.read_text().splitlines()] == ["probe-7"]


@pytest.mark.parametrize("endpoint", ["chat", "completions"])
def test_round_trip_through_server_with_shuffled_output(tmp_path, endpoint):
    probes = [make_probe(i, chat=endpoint == "chat") for i in range(20)]
    emit_batch(probes, tmp_path / "in.jsonl", model=MODEL, endpoint=endpoint)
    with start_server(TaskLookupEngine()) as server:
        run_batch(tmp_path / "in.jsonl", tmp_path / "out.jsonl", server, seed=3)
    out_ids = [
        json.loads(x)["custom_id"] for x in (tmp_path / "out.jsonl").read_text().splitlines()
    ]
    assert out_ids != [p.probe_id for p in probes]  # really out of order
    completions = ingest_batch(tmp_path / "out.jsonl", requests=probes)
    assert set(completions) == {p.probe_id for p in probes}
    for probe in probes:
        completion = completions[probe.probe_id]
        assert isinstance(completion, Completion)
        assert extract_answer(completion.text) == probe.answer
        assert completion.reported_prompt_tokens == probe.prompt_tokens


def _result_line(custom_id: str, text: str, prompt_tokens: int | None = 5, status: int = 200):
    body = {"object": "chat.completion", "choices": [{"message": {"content": text}}]}
    if prompt_tokens is not None:
        body["usage"] = {"prompt_tokens": prompt_tokens}
    return {
        "custom_id": custom_id,
        "response": {"status_code": status, "body": body},
        "error": None,
    }


def _write(path: Path, lines: list) -> Path:
    path.write_text("".join((x if isinstance(x, str) else json.dumps(x)) + "\n" for x in lines))
    return path


def test_corrupt_line_is_reported_with_line_number(tmp_path):
    good = json.dumps(_result_line("a", " 101 ."))
    path = _write(tmp_path / "out.jsonl", [good, good[: len(good) // 2], _result_line("c", " 7")])
    with pytest.raises(BackendError) as info:
        ingest_batch(path)
    message = str(info.value)
    assert "line 2" in message and "not valid JSON" in message and "read_batch_results" in message
    results = read_batch_results(path)
    assert set(results.completions) == {"a", "c"}
    assert [(e.line, e.custom_id) for e in results.errors] == [(2, None)]


def test_failed_requests_are_errors_not_dropped(tmp_path):
    lines = [
        _result_line("ok", " 5"),
        {"custom_id": "e1", "response": None, "error": {"code": "x", "message": "expired"}},
        {
            "custom_id": "e2",
            "response": {"status_code": 500, "body": {"error": {"message": "engine died"}}},
            "error": None,
        },
        {"custom_id": "e3", "response": {"status_code": 200, "body": {"choices": []}}},
        {"response": {"status_code": 200, "body": {}}},
        "[1, 2]",
    ]
    results = read_batch_results(_write(tmp_path / "out.jsonl", lines))
    assert set(results.completions) == {"ok"}
    assert results.errors == (
        BatchLineError(2, "e1", "request failed: expired"),
        BatchLineError(3, "e2", "HTTP 500 engine died"),
        BatchLineError(4, "e3", "response body has no choices"),
        BatchLineError(5, None, "no custom_id"),
        BatchLineError(6, None, "not a JSON object"),
    )
    assert not results.ok


def test_prompt_token_check_missing_and_unknown_ids(tmp_path):
    probes = [make_probe(i) for i in range(3)]
    p0, p1, p2 = probes
    lines = [
        _result_line(p0.probe_id, " 200", prompt_tokens=p0.prompt_tokens),
        _result_line(p1.probe_id, " 201", prompt_tokens=p1.prompt_tokens + 1),
        _result_line("stranger", " 9", prompt_tokens=4),
    ]
    path = _write(tmp_path / "out.jsonl", lines)
    results = read_batch_results(path, requests=probes)
    assert set(results.completions) == {p0.probe_id}
    assert results.missing == (p2.probe_id,)
    messages = {e.custom_id: e.message for e in results.errors}
    assert f"server counted {p1.prompt_tokens + 1}" in messages[p1.probe_id]
    assert f"phaseaware counted {p1.prompt_tokens}" in messages[p1.probe_id]
    assert "matches no probe" in messages["stranger"]
    with pytest.raises(BackendError, match="1 missing"):
        ingest_batch(path, requests=probes)
    shifted = read_batch_results(path, requests=probes[1:2], prompt_token_offset=1)
    assert set(shifted.completions) == {p1.probe_id}


def test_usage_absent_is_accepted_and_duplicates_checked(tmp_path):
    lines = [
        _result_line("a", " 1", prompt_tokens=None),
        _result_line("a", " 1", prompt_tokens=None),
        _result_line("b", " 2"),
        _result_line("b", " 3"),
    ]
    results = read_batch_results(_write(tmp_path / "out.jsonl", lines))
    assert results.completions["a"].reported_prompt_tokens is None
    assert [(e.line, e.custom_id) for e in results.errors] == [(4, "b")]


def test_unreadable_file_is_a_backend_error(tmp_path):
    with pytest.raises(BackendError, match="cannot read batch results"):
        ingest_batch(tmp_path / "absent.jsonl")
