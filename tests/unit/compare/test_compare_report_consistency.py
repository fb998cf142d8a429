"""No line of a compare report contradicts another.

Hundreds of seeded simulated comparisons (question counts, accuracies, how much the
arrangements' answers agree, which arrangements ran, the test's level) are turned
into reports by the real :func:`phaseaware.compare.report.compare_report`. Each
report's text is then read back as a reader would: the table, the paired lines,
the verdict. Every verdict line is checked against the figures printed above it,
and every printed figure against the ones it is computed from.
"""

from __future__ import annotations

import re

import numpy as np
import pytest

from phaseaware.assembly import Chunk
from phaseaware.compare.arrange import ARRANGEMENTS, NAIVE, ORDER_ONLY, PHASE_AWARE, PLACEBO
from phaseaware.compare.log import AnswerRecord
from phaseaware.compare.questions import CompareQuestion
from phaseaware.compare.report import compare_report
from phaseaware.compare.run import CompareRun
from phaseaware.compare.verdict import format_p_value

pytest.importorskip("scipy.stats")

ROW = re.compile(
    r"^  (?P<name>[a-z-]+)(?: \(control\))?\s+(?P<acc>\d+\.\d)%\s+\S+\s+(?P<pred>\d+\.\d%|-)\s"
)
PAIRED = re.compile(
    r"^  (?P<a>[a-z-]+) vs (?P<b>[a-z-]+): (?P<diff>[+-]\d+\.\d) points observed"
    r"(?: \(the profile predicted (?P<pred>[+-]\d+\.\d)\))?; wins (?P<wins>\d+), "
    r"losses (?P<losses>\d+), (?P<p>p (?:< 0\.001|= [0-9.e-]+)), (?P<sig>significant|not significant)$"
)
FIGURES = r"(?P<diff>[+-]\d+\.\d) points \(wins (?P<wins>\d+), losses (?P<losses>\d+), exact McNemar (?P<p>p (?:< 0\.001|= [0-9.e-]+))\)"
HEAD = re.compile(rf"^verdict: (?P<words>[^:]+): {FIGURES}$")
ORDER = re.compile(
    rf"^  order \(order-only vs naive\): (?:{FIGURES}: (?P<words>.+)|not measured .*)$"
)
PLACEMENT = re.compile(
    rf"^  placement \(phase-aware vs placebo\): (?:{FIGURES}: (?P<words>.+)|not measured .*)$"
)


def _simulated_report(seed: int):
    rng = np.random.default_rng(seed)
    n = int(rng.choice([1, 5, 12, 40, 120, 400]))
    names = list(ARRANGEMENTS)
    if rng.random() < 0.3:  # a subset, as --arrangements picks
        keep = rng.random(len(names)) < 0.6
        names = [a for a, k in zip(names, keep, strict=True) if k] or [NAIVE]
    alpha = float(rng.choice([0.05, 0.05, 0.01, 0.1, 0.001, 0.0001]))
    accuracy = {a: float(rng.uniform(0.2, 1.0)) for a in names}
    if rng.random() < 0.3:  # some arrangements alike: null effects
        for a in names:
            accuracy[a] = accuracy[names[0]]
    shared = rng.random(n)  # how hard each question is, shared by the arrangements
    agreement = float(rng.uniform(0, 1))
    questions, records = [], []
    for i in range(n):
        q = CompareQuestion(
            id=f"q{i}", question="?", chunks=(Chunk(text="t", id="c0"),), answers=("yes",)
        )
        questions.append(q)
        for a in names:
            draw = shared[i] if rng.random() < agreement else rng.random()
            records.append(
                AnswerRecord(
                    question_id=q.id,
                    arrangement=a,
                    completion="yes" if draw < accuracy[a] else "no",
                    prompt_tokens=100,
                    padding_tokens=int(rng.integers(0, 3)),
                    repeated_tokens=0,
                    context_tokens=90,
                    dropped=0,
                    evidence_residue=None if rng.random() < 0.1 else int(rng.integers(0, 8)),
                    expected_accuracy=None if rng.random() < 0.05 else float(rng.random()),
                    reported_prompt_tokens=None,
                    elapsed=0.0,
                )
            )
    run = CompareRun(tuple(records), len(records), 0, {"model": "sim"}, "sim.jsonl")
    return compare_report(
        run,
        questions=questions,
        grader=lambda completion, answers: completion in answers,
        grader_name="exact",
        period=8,
        arrangements=names,
        alpha=alpha,
    )


def _significant(p_text: str, alpha: float) -> bool:
    return alpha >= 0.001 if p_text == "p < 0.001" else float(p_text.split("= ")[1]) < alpha


def _effect(test: dict[str, str], alpha: float) -> str:
    wins, losses = int(test["wins"]), int(test["losses"])
    if _significant(test["p"], alpha):
        return "better" if wins > losses else "worse" if losses > wins else "none"
    return "none"


def _check(report) -> None:
    text, alpha = report.text(), report.alpha
    lines = text.splitlines()
    rows = {m["name"]: m for m in map(ROW.match, lines) if m}
    assert set(rows) == {r.arrangement for r in report.rows}, text
    paired = {(m["a"], m["b"]): m for m in map(PAIRED.match, lines) if m}
    assert len(paired) == len(report.paired) + (report.order is not None), text
    for (a, b), m in paired.items():
        wins, losses, diff = int(m["wins"]), int(m["losses"]), float(m["diff"])
        # the difference is the wins' and losses' and the table's accuracies'
        assert abs(diff - 100 * (wins - losses) / report.n_questions) <= 0.051, m.group(0)
        assert abs(diff - (float(rows[a]["acc"]) - float(rows[b]["acc"]))) <= 0.11, m.group(0)
        assert (m["sig"] == "significant") == _significant(m["p"], alpha), m.group(0)
        # an expected gain only beside the observed one, and it is the table's predictions'
        if m["pred"] is not None:
            pa, pb = rows[a]["pred"], rows[b]["pred"]
            assert "-" not in (pa, pb), m.group(0)
            assert abs(float(m["pred"]) - (float(pa[:-1]) - float(pb[:-1]))) <= 0.11
        else:
            assert "-" in (rows[a]["pred"], rows[b]["pred"]), m.group(0)
    for line in lines:
        if "predicted +" in line or "predicted -" in line:
            assert "observed" in line, line
    verdict = [line for line in lines if line.startswith("verdict:")]
    assert len(verdict) == 1, text
    at = lines.index(verdict[0])
    _check_head(lines[at], paired.get((PHASE_AWARE, NAIVE)), alpha)
    order = _check_side(lines[at + 1], ORDER, paired.get((ORDER_ONLY, NAIVE)), alpha, {
        "better": "the order helped", "worse": "the order hurt",
        "none": "no significant order effect"})  # fmt: skip
    placement = _check_side(
        lines[at + 2], PLACEMENT, paired.get((PHASE_AWARE, PLACEBO)), alpha, {
            "better": "phase placement helped",
            "worse": "the placebo did better: the profile's good residues are not this model's; "
            "recalibrate on the model, tokenizer and chat format you serve",
            "none": "no significant placement effect"})  # fmt: skip
    assert ("phase placement helped" in text) == (placement == "better"), text
    gain = _effect(paired[(PHASE_AWARE, NAIVE)], alpha) if (PHASE_AWARE, NAIVE) in paired else None
    _check_attribution(lines[at + 3], order, placement, gain)
    assert at + 4 == len(lines), text


def _check_head(line: str, test, alpha: float) -> None:
    if test is None:
        assert line.startswith("verdict: the gain needs both naive and phase-aware"), line
        return
    m = HEAD.match(line)
    assert m, line
    for key in ("diff", "wins", "losses", "p"):
        assert m[key] == test[key], (line, test.group(0))
    words = {"better": "phase-aware beat naive at alpha",
             "worse": "phase-aware did worse than naive at alpha",
             "none": "no significant difference between phase-aware and naive at alpha"}  # fmt: skip
    assert m["words"].startswith(words[_effect(test, alpha)]), line


def _check_side(line: str, pattern, test, alpha: float, words: dict[str, str]) -> str | None:
    m = pattern.match(line)
    assert m, line
    if test is None:
        assert m["diff"] is None, line
        return None
    for key in ("diff", "wins", "losses", "p"):
        assert m[key] == test[key], (line, test.group(0))
    effect = _effect(test, alpha)
    assert m["words"] == words[effect], line
    return effect


def _check_attribution(line: str, order, placement, gain) -> None:
    assert line.startswith("  attribution: "), line
    words = line.removeprefix("  attribution: ")
    if order is None and placement is None:
        assert words.startswith("not measured"), line
        return
    helped = {name for name, e in (("order", order), ("placement", placement)) if e == "better"}
    claims = {
        "both the order and phase placement carried the result": {"order", "placement"},
        "the order carried the result, not phase placement": {"order"},
        "phase placement carried the result, not the order": {"placement"},
    }
    said = [claim for claim in claims if claim in words]
    assert [claims[c] for c in said] == ([helped] if helped else []), line
    assert ("the order hurt" in words) == (order == "worse"), line
    assert ("phase placement hurt" in words) == (placement == "worse"), line
    assert ("(order not measured)" in words) == (order is None), line
    assert ("(placement not measured)" in words) == (placement is None), line
    assert ("the gain over naive is not attributed" in words) <= (gain == "better"), line
    if "had no significant effect" in words:
        assert not helped and "worse" not in (order, placement), line


def test_every_verdict_line_agrees_with_the_figures_above_it():
    seen = set()
    for seed in range(400):
        report = _simulated_report(seed)
        _check(report)
        seen.add((report.verdict.carried_by, report.verdict.placement_helped))
    # the simulations reach every kind of verdict
    assert {carried for carried, _ in seen} == {"both", "placement", "order", "neither",
                                                "not measured"}  # fmt: skip


@pytest.mark.parametrize(
    ("p", "alpha", "text"),
    [
        (0.0496, 0.05, "p = 0.0496"),  # .2g would print 0.05: significant, so more digits
        (0.0504, 0.05, "p = 0.05"),  # not significant, and 0.05 is not < 0.05
        (0.00049, 0.05, "p < 0.001"),
        (0.00049, 0.0005, "p = 0.00049"),  # below 0.001 but the level is lower still
        (0.000504, 0.0005, "p = 0.0005"),
        (0.5, 0.05, "p = 0.5"),
    ],
)
def test_p_values_are_never_rounded_across_the_level(p, alpha, text):
    assert format_p_value(p, alpha) == text
    shown = 0.0 if text == "p < 0.001" else float(text.split("= ")[1])
    assert (shown < alpha) == (p < alpha)
