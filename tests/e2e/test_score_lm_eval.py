"""Calibrate through lm-evaluation-harness, end to end, against the real reference model.

``phaseaware calibrate --emit-lm-eval-task`` writes the probes as a task; a real
``lm_eval`` (the package from the registry, run as its own process) runs it against
``serve-reference`` (uvicorn on loopback) through its ``local-completions`` model with
``--log_samples``; ``phaseaware score --format lm-eval`` reads the samples back. The
scored accuracies must lie inside ``phaseaware calibrate``'s intervals on the same
model, find the same weak residues (6 and 7 at window = stride = 8), and every key
position must equal the one the task's probe was built with.
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

pytest.importorskip("torch")
pytest.importorskip("transformers")
pytest.importorskip("lm_eval")

pytestmark = pytest.mark.slow

BASE_PROMPTS = "8"  # 64 probes: each request is one CPU generation on the reference model


def _lm_eval(task_dir: Path, out: Path, base_url: str, model: str, home: Path) -> None:
    env = dict(os.environ, HF_DATASETS_OFFLINE="1", HF_HUB_OFFLINE="1", HF_HOME=str(home))
    model_args = (
        f"model={model},base_url={base_url}/completions,tokenizer_backend=none,"
        "tokenized_requests=False,num_concurrent=4,max_retries=1"
    )
    args = [
        sys.executable, "-m", "lm_eval", "--model", "local-completions",
        "--model_args", model_args, "--include_path", str(task_dir),
        "--tasks", "phaseaware_phase_sweep", "--log_samples", "--output_path", str(out),
    ]  # fmt: skip
    done = subprocess.run(args, env=env, capture_output=True, text=True, timeout=900)
    assert done.returncode == 0, done.stderr[-3000:]


@pytest.mark.needs_trained_reference
def test_lm_eval_route_agrees_with_calibrate(served, tmp_path, capsys):
    server, engine = served
    started = time.monotonic()
    common = ["--period", "8", "--base-prompts", BASE_PROMPTS, "--sweeps", "key"]
    assert main(["calibrate", *common, "--out", str(tmp_path / "cal.json"), "--json"]) == 0
    calibrated = json.loads(capsys.readouterr().out)
    assert main(["calibrate", *common, "--emit-lm-eval-task", str(tmp_path / "task")]) == 0
    capsys.readouterr()

    out = tmp_path / "lm-eval-out"
    _lm_eval(tmp_path / "task", out, server.base_url, engine.model_name, tmp_path / "hf")
    samples = sorted(out.rglob("samples_phaseaware_phase_sweep_*.jsonl"))
    assert len(samples) == 1

    scored_profile = tmp_path / "scored.json"
    args = ["score", str(out), "--format", "lm-eval", "--tokenizer", "reference", "--json",
            "--model", engine.model_name, "--profile-out", str(scored_profile)]  # fmt: skip
    assert main(args) == 0
    doc = json.loads(capsys.readouterr().out)
    elapsed = time.monotonic() - started
    print(f"lm-eval route: {doc['n_scored']} probes, {elapsed:.0f} s")

    assert doc["skipped"] == [] and doc["n_scored"] == 8 * int(BASE_PROMPTS)
    rows = doc["residues"]
    weakest = sorted(rows, key=lambda r: (r["accuracy"], r["residue"]))[:2]
    assert {r["residue"] for r in weakest} == {6, 7}
    assert max(r["accuracy"] for r in weakest) < min(
        r["accuracy"] for r in rows if r["residue"] not in (6, 7)
    )
    assert doc["phase_dependence"]["p_value"] < 0.05
    for row in rows:  # inside calibrate's 95% intervals on the same model
        r = row["residue"]
        assert calibrated["ci_low"][r] <= row["accuracy"] <= calibrated["ci_high"][r], row

    # token-exact through the harness: the key where the probe put it
    from phaseaware.scoring.locate import Locator
    from phaseaware.scoring.score import score_log
    from phaseaware.tokenizers import load_tokenizer

    result = score_log(
        out, format="lm-eval", locator=Locator(tokenizer=load_tokenizer("reference"))
    )
    records = [json.loads(line) for line in samples[0].read_text().splitlines()]
    expected = {f"{samples[0].name}:doc {r['doc_id']}": r["doc"]["key_position"] for r in records}
    assert {s.sample_id: s.key_position for s in result.located} == expected

    from phaseaware.profiles.io import load_profile

    profile = load_profile(scored_profile)
    assert profile.n == tuple(r["n"] for r in rows)
    assert profile.extra["score"]["format"] == "lm-eval"
