"""``phaseaware demo`` runs the whole story on the shipped reference model."""

from __future__ import annotations

import json

import pytest

from phaseaware.cli.main import main

pytest.importorskip("torch")
pytest.importorskip("transformers")


def test_demo_runs_end_to_end_and_resumes(tmp_path, capsys) -> None:
    args = ["demo", "--questions", "6", "--base-prompts", "2", "--out", str(tmp_path), "--json"]
    assert main(args) == 0
    first = capsys.readouterr()
    doc = json.loads(first.out)
    assert "[1/2] calibrating phaseaware-reference" in first.err
    assert "calibrate: 32/32 probes done" in first.err  # progress on every long step
    assert "compare: 30/30 answers done" in first.err
    assert [row["strategy"] for row in doc["rag"]] == [
        "naive", "lost-in-the-middle", "phase-aware", "order-only", "placebo"]  # fmt: skip
    for row in doc["rag"]:
        assert row["total"] == 6 and 0 <= row["correct"] <= 6
        assert row["ci_low"] <= row["accuracy"] <= row["ci_high"]
    assert doc["calibration"]["probes_run"] == 2 * 16  # key and window sweeps
    assert (tmp_path / "phaseaware-reference.json").is_file()
    window = doc["calibration"]["local_window_accuracy"]
    assert window is not None and window["n"] >= 2 and window["max_distance"] <= 16
    # A second run resumes the calibration log instead of probing again.
    assert main(args) == 0
    second = capsys.readouterr()
    again = json.loads(second.out)
    assert "[1/2] reusing the saved calibration in" in second.err  # and how to redo it
    assert "(--fresh redoes it)" in second.err
    assert again["calibration"]["probes_run"] == 0
    assert again["calibration"]["probes_skipped"] == 2 * 16
    assert again["rag"] == doc["rag"]


@pytest.mark.needs_trained_reference
def test_phase_aware_assembly_beats_retrieval_order_on_the_reference_model(tmp_path, capsys):
    """The user path end to end: calibrate, write the profile, assemble, answer.

    60 held-out questions, the same retrieved chunks in each arrangement; the
    benchmark (benchmarks/reference.py) has the full-size figures.
    """
    args = ["demo", "--questions", "60", "--base-prompts", "12", "--out", str(tmp_path), "--json"]
    assert main(args) == 0
    doc = json.loads(capsys.readouterr().out)
    assert doc["calibration"]["cochran_p"] < 0.01, doc["calibration"]["verdict"]
    rows = {row["strategy"]: row for row in doc["rag"]}
    phase, naive = rows["phase-aware"], rows["naive"]
    assert phase["accuracy"] >= 0.95, phase
    assert phase["correct"] >= naive["correct"] + 5, (phase, naive)
    assert phase["padding_overhead"] <= 0.05


def test_demo_with_other_questions_reuses_the_calibration_and_keeps_each_answer_log(
    tmp_path, capsys
) -> None:
    base = ["demo", "--base-prompts", "2", "--out", str(tmp_path), "--json"]
    assert main([*base, "--questions", "2"]) == 0
    capsys.readouterr()
    assert main([*base, "--questions", "3"]) == 0  # another comparison, same calibration
    doc = json.loads(capsys.readouterr().out)
    assert doc["calibration"]["probes_run"] == 0 and doc["compare"]["n_requests"] == 3 * 5
    assert len(list(tmp_path.glob("phaseaware-reference.compare-*.jsonl"))) == 2
