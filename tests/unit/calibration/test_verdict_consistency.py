"""No line of a ``score`` or ``calibrate`` report contradicts another (issue 36, item 2).

Over many seeded logs (planted periods, flat accuracy, and real-looking effects whose outcomes
are then shuffled across positions, so no phase effect can remain), with ``--period auto`` and
with a given period, the printed text is parsed and every verdict is checked against the
figures printed above it:

* "phase-sensitive" only when every test the verdict names is printed with p < alpha, and a
  period is printed as detected (under auto);
* "not phase-sensitive" only when a printed test it names is at or above alpha;
* "no period detected": no line claims a detected period, no test is printed at the candidate,
  no weak residue is claimed, no expected gain is printed;
* a detected period is never printed above a chi-square at that period that finds nothing.
"""

from __future__ import annotations

import re
from pathlib import Path

import numpy as np
import pytest

from phaseaware.calibration.analysis import analyze_log, build_profile_from_log
from phaseaware.calibration.report import format_report as calibrate_report
from phaseaware.calibration.runner import CalibrationResult
from phaseaware.scoring.locate import Located
from phaseaware.scoring.report import format_report as score_report
from phaseaware.scoring.score import ScoreResult
from phaseaware.scoring.tally import tally
from tests.support import simulated_runs as sr

ALPHA = 0.05
P = re.compile(r"p (?:=|<) ([0-9.e+-]+)")


def _p(text: str) -> float:
    found = P.search(text)
    assert found, text
    return float(found.group(1))


def _scenarios() -> list[tuple[str, np.ndarray, bool]]:
    """(name, accuracy by residue, shuffle the outcomes across positions afterwards)."""
    out = []
    for period in (2, 3, 5, 8, 12):
        out.append((f"period {period}", sr.effect(period, high=0.95, points=8.0), False))
        out.append((f"period {period} shuffled", sr.effect(period, points=30.0), True))
    for acc in (0.9, 0.6):
        out.append((f"flat {acc}", np.array([acc]), False))
    return out


def _check_lines(lines: list[str], *, auto: bool) -> None:
    text = "\n".join(lines)
    head = next(line for line in lines if line.startswith("verdict:"))
    no_period = head.startswith("verdict: no period detected")
    if no_period:
        assert auto
        assert not re.search(r"\(detected", text), text
        assert "expected gain" not in text and "weak residue" not in text, text
        assert "phase dependence: not tested" in text or "key residue: not tested" in text
        assert not re.search(r"(?<!not )phase-sensitive at", text), text
        return
    sensitive = head.startswith("verdict: phase-sensitive")
    verdict_p = _p(head)
    assert sensitive == (verdict_p < ALPHA), head
    chi = [line for line in lines if line.startswith("phase dependence:")]
    if chi:  # score: the chi-square printed above the verdict
        assert (_p(chi[0]) < ALPHA) == sensitive or not auto and not sensitive, text
        if sensitive:  # the verdict's p is the larger of the tests it names (2 digits)
            assert _p(chi[0]) < ALPHA and float(f"{_p(chi[0]):.2g}") <= verdict_p, text
    if auto:
        detected = [line for line in lines if "(detected" in line]
        assert detected, text
        if chi:
            assert _p(chi[0]) < ALPHA, text  # never "detected" above a null chi-square
        held = re.search(r"Holm-adjusted p (?:=|<) ([0-9.e+-]+)", text)
        assert held and float(held.group(1)) < ALPHA, text
    if sensitive:
        assert "expected gain" in text
    else:
        assert "expected gain" not in text


def _located(rng: np.random.Generator, accuracy: np.ndarray, shuffle: bool) -> list[Located]:
    positions = sr.eval_positions(rng)
    right = sr.outcomes(rng, positions, accuracy)
    if shuffle:
        right = rng.permutation(right)
    return [
        Located(f"s{i}", int(p), int(p) + int(rng.integers(20, 60)), bool(r))
        for i, (p, r) in enumerate(zip(positions, right, strict=True))
    ]


@pytest.mark.parametrize("period", [None, 8, 3])
def test_score_verdicts_agree_with_the_printed_figures(period):
    rng = np.random.default_rng(36 + (period or 0))
    seen = set()
    for name, accuracy, shuffle in _scenarios():
        for _ in range(6):
            located = _located(rng, accuracy, shuffle)
            t = tally(located, period=period, max_period=16)
            result = ScoreResult(Path("sim.jsonl"), "jsonl", "sim", "sim", tuple(located), (), t)
            lines = score_report(result).splitlines()
            _check_lines(lines, auto=period is None)
            seen.add((name, t.verdict.phase_sensitive))
    if period is None:  # the scenarios cover both answers
        assert {s for _, s in seen} == {True, False}


@pytest.mark.parametrize("period", ["auto", 8])
def test_calibrate_verdicts_agree_with_the_printed_figures(tmp_path, period):
    rng = np.random.default_rng(360)
    answers = set()
    for name, accuracy, shuffle in _scenarios():
        for run in range(3):
            log = sr.write_calibration_log(tmp_path / f"{run}.jsonl", rng, accuracy, period=period)
            if shuffle:
                log = sr.shuffle_outcomes(log, rng)
            analysis = analyze_log(log)
            result = CalibrationResult(build_profile_from_log(log), analysis, log, None, 480, 0)
            lines = calibrate_report(result).splitlines()
            _check_lines(lines, auto=period == "auto")
            key = next(line for line in lines if line.startswith("key residue:"))
            head = next(line for line in lines if line.startswith("verdict:"))
            if head.startswith("verdict: no period detected"):
                assert key.startswith("key residue: not tested"), (name, key)
            elif head.startswith("verdict: phase-sensitive"):
                assert "no significant phase effect" not in key, (name, key)
            else:
                assert not key.startswith("key residue: phase-sensitive"), (name, key, head)
            answers.add(head.split(" at ")[0])
    assert len(answers) >= 2, answers
