"""calibrate --emit-batch -> vLLM's run_batch (DeepSeek-V4 mode, server defaults) -> --ingest.

The emitted lines state their chat settings (``chat_template_kwargs``), so the batch
runner renders them as phaseaware planned even though its default is thinking with
effort "high"; ``--ingest`` then accepts every probe's ``usage.prompt_tokens``.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from phaseaware.cli.main import main
from tests.e2e.vllm.conftest import TIMINGS
from tests.support.vllm_server import VllmServer, build_model_dir, deepseek_v4_files, run_batch


def test_emit_batch_run_batch_ingest(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    out = tmp_path / "profile.json"
    base = [
        "calibrate", "--model", "tiny", "--tokenizer", "deepseek-v4", "--chat-format", "deepseek-v4",
        "--context-tokens", "512", "--period", "8", "--base-prompts", "2", "--sweeps", "key",
        "--seed", "3", "--out", str(out),
    ]  # fmt: skip
    batch_in, batch_out = tmp_path / "in.jsonl", tmp_path / "out.jsonl"
    assert main([*base, "--emit-batch", str(batch_in)]) == 0
    lines = [json.loads(x) for x in batch_in.read_text().splitlines()]
    assert lines and all(
        line["body"]["chat_template_kwargs"]["thinking"] is False for line in lines
    )
    model = build_model_dir(tmp_path / "model", deepseek_v4_files())
    TIMINGS["run_batch"] = run_batch(
        model, batch_in, batch_out, tokenizer_mode="deepseek_v4", log=tmp_path / "batch.log"
    )
    capsys.readouterr()
    code = main([*base, "--ingest", str(batch_out)])
    captured = capsys.readouterr()
    assert "prompt token" not in captured.err.lower(), captured.err
    assert code == 0, captured.err


def test_calibrate_http_backend_states_settings(
    vllm_v4: VllmServer, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """``calibrate --backend openai`` against the V4 server with its defaults: every probe's
    ``usage.prompt_tokens`` matches (the requests state thinking off; a request naming none
    would be rendered with thinking and a reasoning-effort preamble and be refused)."""
    out = tmp_path / "profile.json"
    code = main([
        "calibrate", "--backend", "openai", "--base-url", vllm_v4.base_url, "--model", "tiny",
        "--tokenizer", "deepseek-v4", "--chat-format", "deepseek-v4", "--context-tokens", "512",
        "--period", "8", "--base-prompts", "2", "--sweeps", "key", "--seed", "3",
        "--out", str(out), "--timeout", "60",
    ])  # fmt: skip
    captured = capsys.readouterr()
    assert "prompt token" not in captured.err.lower(), captured.err
    assert code == 0, captured.err
