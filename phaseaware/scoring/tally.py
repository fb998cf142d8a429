"""Accuracy by key residue of located samples, a test of phase dependence, by length bucket.

Eval samples are not paired (each prompt has one key position), so the test
of "accuracy does not depend on the residue" is Pearson's chi-square test of
homogeneity over the residue × correct table (``df = residues observed - 1``),
its p-value from the calibration statistics' chi-square tail. Accuracies and
Wilson 95% intervals come from :func:`phaseaware.calibration.stats.residue_summary`
(each sample one observed outcome). ``period=None`` detects the period as
``calibrate --period auto`` does: accuracy by ``key_position mod max_period``,
then :func:`phaseaware.calibration.stats.detect_period` with candidates up to
``max_period // 2``; the candidate is used when no period is significant.
Fractions are 0..1; positions and lengths are tokens.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from phaseaware.calibration.stats import PeriodDetection, detect_period, residue_summary
from phaseaware.calibration.stats.dist import chi2_sf
from phaseaware.calibration.verdict import Verdict, phase_verdict
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
    """Samples with ``low <= prompt_tokens <= high``, by residue, with their own test."""

    low: int
    high: int
    n: int
    residues: tuple[ResidueRow, ...]
    phase_dependence: PhaseTest


@dataclass(frozen=True)
class Tally:
    period: int
    detection: PeriodDetection | None
    residues: tuple[ResidueRow, ...]
    phase_dependence: PhaseTest
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


def choose_period(located: Sequence[Located], *, max_period: int) -> tuple[int, PeriodDetection]:
    """The period ``calibrate --period auto`` would report for these samples (see module doc)."""
    offsets = np.array([s.key_position % max_period for s in located])
    right = np.array([1.0 if s.correct else 0.0 for s in located])
    counts = np.bincount(offsets, minlength=max_period)
    candidates = max_period // 2
    if candidates < 2 or int((counts > 0).sum()) <= candidates:
        raise EvalLogError(
            f"--period auto needs samples at more than {candidates} of the {max_period} "
            f"positions mod {max_period} (--max-period) and --max-period >= 4; "
            "pass --period N instead"
        )
    # outcomes by position mod max_period, one column each (NaN pads the shorter columns):
    # the detector's binomial test then weighs each position by its sample count
    outcomes = np.full((int(counts.max()), max_period), np.nan)
    filled = np.zeros(max_period, dtype=int)
    for offset, value in zip(offsets.tolist(), right.tolist(), strict=True):
        outcomes[filled[offset], offset] = value
        filled[offset] += 1
    detection = detect_period(outcomes, max_period=candidates)
    return (detection.period or detection.candidate), detection


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
        period, detection = choose_period(located, max_period=max_period)
    rows = residue_rows(located, period)
    seen = [r.residue for r in rows if r.n > 0]
    if len(seen) < 2:  # the verdict compares residues; say so in score's own words
        raise EvalLogError(
            f"every scored sample's key sits at residue {seen[0]} of period {period} "
            f"({len(located)} samples): accuracy by residue needs keys at two residues or "
            "more; score a log whose needles sit at varied positions, or pass another --period"
        )
    by_length = tuple(
        LengthBucket(low, high, len(members), sub, phase_test(sub))
        for low, high, members in _buckets(located, length_buckets)
        for sub in [residue_rows(members, period)]
    )
    test = phase_test(rows)
    # the total prompt length's residue too (the field report's effect): counts by
    # prompt_tokens mod period, beside the key's residue
    length_n = [0] * period
    length_ok = [0] * period
    for sample in located:
        length_n[sample.prompt_tokens % period] += 1
        length_ok[sample.prompt_tokens % period] += int(sample.correct)
    # one prompt length for every sample (a calibration sweep's exact-length probes):
    # nothing to say about the total length's residue
    varied = sum(1 for n in length_n if n) >= 2
    verdict = phase_verdict(
        successes=[r.correct for r in rows],
        n=[r.n for r in rows],
        period=period,
        length_successes=length_ok if varied else None,
        length_n=length_n if varied else None,
        p_value=test.p_value,
        test=test.test,
    )
    return Tally(period, detection, rows, test, by_length, len(located), verdict)
