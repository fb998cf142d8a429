"""Servers that fight back: trickled answers, huge answers, impossible usage counts.

Each case runs the real CLI against a real socket server on loopback
(:mod:`tests.support.hostile_http`) and checks a one-line typed error within a bound.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path

import pytest

from phaseaware.cli.main import main
from tests.support.hostile_http import start_hostile

pytest.importorskip("openai")


def _calibrate(base_url: str, tmp: Path, *extra: str) -> list[str]:
    return ["calibrate", "--backend", "openai", "--base-url", base_url, "--model", "m",
            "--tokenizer", "tiktoken:cl100k_base", "--chat-format", "chatml",
            "--context-tokens", "160", "--base-prompts", "1", "--period", "2",
            "--sweeps", "key", "--concurrency", "1", "--out", str(tmp / "p.json"),
            "--log", str(tmp / "c.jsonl"), *extra]  # fmt: skip


def _run(args: list[str], capsys: pytest.CaptureFixture[str]) -> tuple[int, str, float]:
    started = time.monotonic()
    code = main(args)
    took = time.monotonic() - started
    err = capsys.readouterr().err
    assert "Traceback" not in err and "this is a bug" not in err
    if code == 1:
        assert err.count("phaseaware: error: ") == 1, err
    return code, err, took


@pytest.mark.parametrize("mode", ["trickle-head", "trickle-body"])
def test_timeout_bounds_a_whole_attempt(
    mode: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    with start_hostile(mode, interval=0.2) as server:
        args = _calibrate(server.base_url, tmp_path, "--timeout", "1.5", "--max-retries", "1")
        code, err, took = _run(args, capsys)
    assert code == 1 and "timed out after 2 attempts" in err, err
    # 2 attempts of 1.5 s and the client's backoff (< 1 s); never the trickle's pace
    assert took < 12, f"{took:.1f} s"
    assert server.requests <= 4  # 2 attempts for each probe the pool had started


def test_probe_endpoint_has_a_timeout(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    with start_hostile("trickle-head", interval=0.2) as server:
        args = ["probe-endpoint", "--base-url", server.base_url, "--model", "m",
                "--tokenizer", "tiktoken:cl100k_base", "--chat-format", "chatml",
                "--mode", "count", "--timeout", "1", "--no-save"]  # fmt: skip
        code, err, took = _run(args, capsys)
    assert code == 1 and "did not answer within --timeout" in err, err
    assert took < 15, f"{took:.1f} s"


# VmHWM: the peak RSS of this program's own memory (ru_maxrss would also count the
# parent's pages the child shared before exec)
CHILD = """
import sys
from phaseaware.cli.main import main
code = main(sys.argv[1:])
with open("/proc/self/status") as status:
    peak = next(line.split()[1] for line in status if line.startswith("VmHWM:"))
print("maxrss_kb", peak, flush=True)
sys.exit(code)
"""


@pytest.mark.skipif(not Path("/proc/self/status").exists(), reason="reads VmHWM (Linux)")
@pytest.mark.parametrize("mode", ["huge", "huge-declared"])
def test_a_huge_response_is_capped(mode: str, tmp_path: Path) -> None:
    """300 MB answers: the client stops reading at the cap (RSS stays far below)."""
    with start_hostile(mode, size=300 * 1024 * 1024) as server:
        args = _calibrate(server.base_url, tmp_path, "--max-retries", "0")
        done = subprocess.run(
            [sys.executable, "-c", CHILD, *args], capture_output=True, text=True, timeout=120,
            env={**os.environ, "PYTHONPATH": os.pathsep.join(sys.path)},
        )  # fmt: skip
    assert done.returncode == 1, done.stderr
    assert "sent a response larger than 16777216 bytes" in done.stderr, done.stderr
    assert "Traceback" not in done.stderr
    rss_mb = int(done.stdout.split("maxrss_kb")[1]) / 1024
    assert rss_mb < 400, f"peak RSS {rss_mb:.0f} MB"


def _chat_answer(prompt_tokens: str) -> bytes:
    return (
        '{"id": "x", "object": "chat.completion", "created": 1, "model": "m", "choices": '
        '[{"index": 0, "finish_reason": "stop", "message": {"role": "assistant", '
        '"content": "0"}}], "usage": {"prompt_tokens": ' + prompt_tokens + ", "
        '"completion_tokens": 1, "total_tokens": 2}}'
    ).encode()


@pytest.mark.parametrize("value", ["NaN", "Infinity", "-1", "1e400", "12.5", "10000000000000"])
def test_impossible_prompt_token_counts_are_typed_errors(
    value: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    with start_hostile("json", body=_chat_answer(value)) as server:
        code, err, _ = _run(_calibrate(server.base_url, tmp_path, "--max-retries", "0"), capsys)
    assert code == 1, err
    assert "usage.prompt_tokens = " in err and "which is not a token count" in err, err
    assert not (tmp_path / "p.json").exists()
    lines = (tmp_path / "c.jsonl").read_text(encoding="utf-8").splitlines()
    assert len(lines) == 1  # the header only: no probe was logged with a bad count
    json.loads(lines[0])
