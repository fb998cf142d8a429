"""Accuracy by key residue of located samples, a test of phase dependence, by length bucket.

Eval samples are not paired (each prompt has one key position), so the test
of "accuracy does not depend on the residue" is Pearson's chi-square test of
homogeneity over the residue × correct table (``df = residues observed - 1``),
its p-value from the calibration statistics' chi-square tail. Accuracies and
Wilson 95% intervals come from :func:`phaseaware.calibration.stats.residue_summary`
(each sample one observed outcome). ``period=None`` detects the period as
``calibrate --period auto`` does: every candidate ``2..max_period`` tested on
``key_position mod p`` itself
(:func:`phaseaware.calibration.stats.detect_period_at_positions`). With a
period detected, the residue table and chi-square are at that period and the
verdict needs both the detection and the chi-square at ``alpha``; with none,
the table is shown at the best candidate and nothing is tested there (no
chi-square, no length-bucket test): the verdict is "no period detected".
Fractions are 0..1; positions and lengths are tokens.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from phaseaware.calibration.stats import (
    PeriodDetection,
    detect_period_at_positions,
    residue_summary,
)
from phaseaware.calibration.stats.dist import chi2_sf
from phaseaware.calibration.stats.period import unconfirmed
from phaseaware.calibration.verdict import Verdict, auto_period_test, phase_verdict
from phaseaware.scoring.errors import EvalLogError
from phaseaware.scoring.locate import Located

__all__ = [
    "PHASE_TEST",
    "ResidueRow",
    "PhaseTest",
    "LengthBucket",
    "Tally",
    "residue_rows",
    "phase_test",
    "choose_period",
    "tally",
]

PHASE_TEST = "chi-square test of homogeneity (residue x correct)"


@dataclass(frozen=True)
class ResidueRow:
    """Samples whose key sat at ``residue``: ``correct`` of ``n``; accuracy and 95% Wilson
    interval ``ci`` (``None`` when ``n == 0``)."""

    residue: int
    n: int
    correct: int
    accuracy: float | None
    ci: tuple[float, float] | None


@dataclass(frozen=True)
class PhaseTest:
    test: str
    statistic: float
    df: int
    p_value: float


@dataclass(frozen=True)
class LengthBucket:
    """Samples with ``low <= prompt_tokens <= high``, by residue, with their own test
    (``None``: no period was detected, nothing is tested)."""

    low: int
    high: int
    n: int
    residues: tuple[ResidueRow, ...]
    phase_dependence: PhaseTest | None


@dataclass(frozen=True)
class Tally:
    """``phase_dependence`` is ``None`` when ``--period auto`` detected no period (the
    residues are then those of the best candidate, untested)."""

    period: int
    detection: PeriodDetection | None
    residues: tuple[ResidueRow, ...]
    phase_dependence: PhaseTest | None
    by_length: tuple[LengthBucket, ...]
    n: int
    verdict: Verdict


def residue_rows(located: Sequence[Located], period: int) -> tuple[ResidueRow, ...]:
    """Per-residue counts, accuracy and Wilson interval (``key_position mod period``)."""
    if not located:
        return tuple(ResidueRow(r, 0, 0, None, None) for r in range(period))
    outcomes = np.full((len(located), period), np.nan)
    for i, sample in enumerate(located):
        outcomes[i, sample.key_position % period] = 1.0 if sample.correct else 0.0
    s = residue_summary(outcomes)
    return tuple(
        ResidueRow(
            residue=r,
            n=s.n[r],
            correct=s.successes[r],
            accuracy=None if s.n[r] == 0 else s.accuracy[r],
            ci=None if s.n[r] == 0 else (s.ci_low[r], s.ci_high[r]),
        )
        for r in range(period)
    )


def phase_test(rows: Sequence[ResidueRow]) -> PhaseTest:
    """Pearson's chi-square over the observed residues; ``p = 1`` when nothing can differ
    (fewer than two residues observed, or every sample right, or every one wrong)."""
    seen = [r for r in rows if r.n > 0]
    df = max(0, len(seen) - 1)
    total = sum(r.n for r in seen)
    rate = sum(r.correct for r in seen) / total if total else 0.0
    if len(seen) < 2 or rate in (0.0, 1.0):
        return PhaseTest(PHASE_TEST, 0.0, df, 1.0)
    statistic = sum((r.correct - r.n * rate) ** 2 / (r.n * rate * (1.0 - rate)) for r in seen)
    return PhaseTest(PHASE_TEST, float(statistic), df, chi2_sf(statistic, df))


def choose_period(located: Sequence[Located], *, max_period: int) -> PeriodDetection:
    """Detect the period of these samples as ``calibrate --period auto`` does (see module doc):
    every candidate ``2..max_period`` tested on ``key_position mod p`` itself."""
    positions = np.array([s.key_position for s in located], dtype=np.int64)
    right = np.array([1.0 if s.correct else 0.0 for s in located])
    if max_period < 2 or np.unique(positions).size <= max_period:
        raise EvalLogError(
            f"--period auto needs samples at more than {max_period} distinct key positions "
            f"(--max-period {max_period}); the log has {np.unique(positions).size}: "
            "pass --period N or a smaller --max-period"
        )
    return detect_period_at_positions(positions, right, max_period=max_period)


def _buckets(located: Sequence[Located], n_buckets: int) -> list[tuple[int, int, list[Located]]]:
    """Up to ``n_buckets`` equal-count ranges of prompt length (tokens), inclusive bounds."""
    lengths = sorted(s.prompt_tokens for s in located)
    if not lengths:
        return []
    edges = sorted(
        {lengths[min(len(lengths) - 1, (i * len(lengths)) // n_buckets)] for i in range(n_buckets)}
    )
    out = []
    for i, low in enumerate(edges):
        high = edges[i + 1] - 1 if i + 1 < len(edges) else lengths[-1]
        members = [s for s in located if low <= s.prompt_tokens <= high]
        if members:
            out.append((low, high, members))
    return out


def tally(
    located: Sequence[Located],
    *,
    period: int | None,
    max_period: int = 16,
    length_buckets: int = 4,
) -> Tally:
    """Everything ``phaseaware score`` reports about ``located`` (see module doc)."""
    if not located:
        raise EvalLogError(
            "no sample could be placed in its prompt (see the skipped reasons); check "
            "--format, --needle-field, --tokenizer and --chat-format"
        )
    detection = None
    if period is None:
        detection = choose_period(located, max_period=max_period)
        period = detection.period or detection.candidate
    rows = residue_rows(located, period)
    seen = [r.residue for r in rows if r.n > 0]
    if len(seen) < 2:  # the verdict compares residues; say so in score's own words
        raise EvalLogError(
            f"every scored sample's key sits at residue {seen[0]} of period {period} "
            f"({len(located)} samples): accuracy by residue needs keys at two residues or "
            "more; score a log whose needles sit at varied positions, or pass another --period"
        )
    confirm = None
    if detection is not None and detection.period is not None:
        confirm = phase_test(rows)
        if not confirm.p_value < detection.alpha:
            detection = unconfirmed(detection, test="chi-square", p_value=confirm.p_value)
    tested = detection is None or detection.period is not None
    by_length = tuple(
        LengthBucket(low, high, len(members), sub, phase_test(sub) if tested else None)
        for low, high, members in _buckets(located, length_buckets)
        for sub in [residue_rows(members, period)]
    )
    test = phase_test(rows) if tested else None
    # the total prompt length's residue too (the field report's effect): counts by
    # prompt_tokens mod period, beside the key's residue
    length_n = [0] * period
    length_ok = [0] * period
    for sample in located:
        length_n[sample.prompt_tokens % period] += 1
        length_ok[sample.prompt_tokens % period] += int(sample.correct)
    # one prompt length for every sample (a calibration sweep's exact-length probes):
    # nothing to say about the total length's residue; no period: nothing tested
    varied = tested and sum(1 for n in length_n if n) >= 2
    if detection is not None:
        p_value, test_name, note = auto_period_test(
            detection,
            residue_p=None if confirm is None else confirm.p_value,
            residue_test="chi-square",
        )
    else:
        assert test is not None  # a given period is always tested
        p_value, test_name, note = test.p_value, test.test, None
    verdict = phase_verdict(
        successes=[r.correct for r in rows],
        n=[r.n for r in rows],
        period=period,
        length_successes=length_ok if varied else None,
        length_n=length_n if varied else None,
        p_value=p_value,
        test=test_name,
        period_note=note,
        period_detected=None if detection is None else detection.period is not None,
    )
    return Tally(period, detection, rows, test, by_length, len(located), verdict)
