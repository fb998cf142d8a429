"""Statistics of a calibration sweep: accuracy by residue, tests, shrinkage, verdict.

Data model
----------
A sweep is a paired design. ``outcomes[b, r]`` is the binary outcome (1 =
answered correctly) of base prompt ``b`` (the paired unit) with its key token
at residue ``r`` (0..P-1). A missing outcome (an interrupted run, a failed
request) is ``NaN`` or ``-1``. The length sweep (total prompt length mod P)
uses the same layout and the same functions.

How incomplete rows are used:

* per-residue counts, accuracies, Wilson intervals, the gap and the bootstrap
  use *every* observed outcome (so ``n`` may differ between residues);
* the paired tests (Cochran's Q, McNemar) use *complete rows only*, because a
  pair needs both outcomes from the same base prompt.

Pure numpy; no scipy. Every function returns new objects and never changes its
arguments. Accuracies, gaps and half-widths are fractions (0..1) unless a name
says "points" (percentage points, 0..100).
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any, NamedTuple

import numpy as np

from phaseaware.calibrate.stats_dist import binom_two_sided_half, chi2_sf
from phaseaware.calibrate.stats_period import PeriodDetection, detect_period
from phaseaware.calibrate.stats_plan import CalibrationPlan, plan_calibration
from phaseaware.errors import InputError
from phaseaware.stats import Z_95, wilson_interval

__all__ = [
    "ResidueSummary",
    "CochranResult",
    "McNemarResult",
    "BetaPrior",
    "CalibrationStats",
    "PeriodDetection",
    "CalibrationPlan",
    "as_outcomes",
    "residue_summary",
    "bootstrap_gap_interval",
    "cochran_q",
    "mcnemar_vs_best",
    "weak_residues",
    "beta_prior",
    "shrink_accuracies",
    "detect_period",
    "plan_calibration",
    "verdict",
    "calibration_stats",
]

#: Bounds on the beta prior's strength (alpha + beta, in pseudo-trials).
MIN_PRIOR_STRENGTH = 1.0
MAX_PRIOR_STRENGTH = 1e6


def as_outcomes(outcomes: Any) -> np.ndarray:
    """Return a new float array (base prompts × residues): 0.0, 1.0, or NaN for missing.

    Accepts bools, ints (``-1`` = missing) or floats (``NaN`` = missing).
    Raises ``InputError`` for anything that is not 2-D or holds other values.
    """
    arr = np.array(outcomes, dtype=float, copy=True)
    if arr.ndim != 2 or arr.shape[1] < 1:
        raise InputError(
            f"outcomes must be a 2-D array (base prompts x residues), got shape {arr.shape}; "
            "pass one row per base prompt and one column per residue"
        )
    arr[arr == -1] = np.nan
    ok = np.isnan(arr) | (arr == 0) | (arr == 1)
    if not ok.all():
        bad = np.unique(arr[~ok])[:5].tolist()
        raise InputError(
            f"outcomes must be 0/1 (NaN or -1 for missing), found {bad}; "
            "score each probe as correct (1) or not (0)"
        )
    return arr


def _complete_rows(arr: np.ndarray) -> np.ndarray:
    return arr[~np.isnan(arr).any(axis=1)]


# --------------------------------------------------------------------------- summary


@dataclass(frozen=True)
class ResidueSummary:
    """Accuracy by residue with Wilson 95% intervals, as fractions (0..1).

    ``accuracy[r]`` is NaN where residue ``r`` has no observed outcome; such
    residues are skipped by ``mean``/``worst``/``best``. ``mean`` is the
    unweighted mean of the per-residue accuracies (every residue counts once),
    ``gap = best - worst``. Invariants: ``ci_low[r] <= accuracy[r] <= ci_high[r]``
    and ``worst <= mean <= best``.
    """

    period: int
    n: tuple[int, ...]
    successes: tuple[int, ...]
    accuracy: tuple[float, ...]
    ci_low: tuple[float, ...]
    ci_high: tuple[float, ...]
    mean: float
    worst: float
    worst_residue: int
    best: float
    best_residue: int
    gap: float


def _summary_from_counts(successes: np.ndarray, n: np.ndarray) -> ResidueSummary:
    if not (n > 0).any():
        raise InputError("outcomes hold no observed value; run the calibration sweep first")
    with np.errstate(invalid="ignore", divide="ignore"):
        acc = np.where(n > 0, successes / np.maximum(n, 1), np.nan)
    lows, highs = [], []
    for s, k in zip(successes.tolist(), n.tolist(), strict=True):
        low, high = wilson_interval(int(s), int(k), z=Z_95) if k > 0 else (math.nan, math.nan)
        lows.append(low)
        highs.append(high)
    observed = np.flatnonzero(n > 0)
    worst_residue = int(observed[np.argmin(acc[observed])])
    best_residue = int(observed[np.argmax(acc[observed])])
    worst, best = float(acc[worst_residue]), float(acc[best_residue])
    mean = min(best, max(worst, float(np.mean(acc[observed]))))  # guard float rounding
    return ResidueSummary(
        period=int(n.size),
        n=tuple(int(k) for k in n),
        successes=tuple(int(s) for s in successes),
        accuracy=tuple(float(a) for a in acc),
        ci_low=tuple(lows),
        ci_high=tuple(highs),
        mean=mean,
        worst=worst,
        worst_residue=worst_residue,
        best=best,
        best_residue=best_residue,
        gap=best - worst,
    )


def residue_summary(outcomes: Any) -> ResidueSummary:
    """Per-residue counts, accuracy and Wilson 95% interval, using every observed outcome."""
    arr = as_outcomes(outcomes)
    observed = ~np.isnan(arr)
    n = observed.sum(axis=0).astype(np.int64)
    successes = np.where(observed, arr, 0.0).sum(axis=0).astype(np.int64)
    return _summary_from_counts(successes, n)


def bootstrap_gap_interval(
    outcomes: Any, *, n_boot: int = 2000, seed: int = 0, level: float = 0.95
) -> tuple[float, float]:
    """Percentile bootstrap interval ``(low, high)`` for the gap (best - worst accuracy).

    Resamples base prompts (whole rows, keeping the pairing) with replacement,
    ``n_boot`` times, with ``np.random.default_rng(seed)``.

    Selection bias: the gap is a max minus a min over noisy estimates, so it is
    biased upward (with a flat truth the expected gap is > 0 and grows with the
    period and shrinks with n), and bootstrap replicates inherit that bias. The
    interval describes the size of an effect that the tests have found; it is
    *not* a test of "no phase effect" (use ``cochran_q``/``mcnemar_vs_best``).
    """
    if n_boot < 1:
        raise InputError(f"n_boot must be >= 1, got {n_boot}")
    if not 0 < level < 1:
        raise InputError(f"level must be a fraction in (0, 1), got {level}")
    arr = as_outcomes(outcomes)
    rows = arr.shape[0]
    if rows == 0:
        raise InputError("outcomes have no rows; run the calibration sweep first")
    observed = (~np.isnan(arr)).astype(float)
    values = np.where(np.isnan(arr), 0.0, arr)
    rng = np.random.default_rng(seed)
    weights = rng.multinomial(rows, np.full(rows, 1.0 / rows), size=n_boot).astype(float)
    n = weights @ observed
    with np.errstate(invalid="ignore", divide="ignore"):
        acc = np.where(n > 0, (weights @ values) / np.maximum(n, 1.0), np.nan)
    has = ~np.isnan(acc).all(axis=1)
    if not has.any():
        raise InputError("outcomes hold no observed value; run the calibration sweep first")
    acc = acc[has]
    gaps = np.nanmax(acc, axis=1) - np.nanmin(acc, axis=1)
    tail = (1.0 - level) / 2.0
    low, high = np.quantile(gaps, [tail, 1.0 - tail])
    return (float(low), float(high))


# --------------------------------------------------------------------------- tests


class CochranResult(NamedTuple):
    """Cochran's Q test of "accuracy does not depend on the residue"."""

    q: float
    df: int
    p_value: float


def cochran_q(outcomes: Any) -> CochranResult:
    """Cochran's Q over complete rows; ``df = P - 1``; p from the chi-square tail.

    Rows that are all 0 or all 1 carry no information and do not change Q.
    Degenerate cases (no complete row, every row constant, or ``P < 2``) give
    ``Q = 0, p = 1``.
    """
    arr = _complete_rows(as_outcomes(outcomes))
    k = arr.shape[1]
    df = k - 1
    if k < 2 or arr.shape[0] == 0:
        return CochranResult(0.0, df, 1.0)
    col = arr.sum(axis=0)
    row = arr.sum(axis=1)
    total = float(col.sum())
    denom = k * total - float(np.sum(row**2))
    if denom <= 0:
        return CochranResult(0.0, df, 1.0)
    q = (k - 1) * (k * float(np.sum(col**2)) - total**2) / denom
    q = max(0.0, q)
    return CochranResult(q, df, chi2_sf(q, df))


@dataclass(frozen=True)
class McNemarResult:
    """Exact McNemar test of ``residue`` against ``best_residue`` over complete rows.

    ``best_only`` counts rows right at the best residue and wrong at this one,
    ``residue_only`` the reverse; accuracies are over complete rows (fractions).
    ``p_value`` is the exact two-sided binomial p-value, ``p_holm`` the
    Holm-corrected one (family: every residue tested against the best).
    """

    residue: int
    best_residue: int
    n_pairs: int
    best_only: int
    residue_only: int
    accuracy: float
    best_accuracy: float
    p_value: float
    p_holm: float


def holm_adjust(p_values: list[float]) -> list[float]:
    """Holm step-down adjusted p-values, in the input order."""
    m = len(p_values)
    order = sorted(range(m), key=lambda i: p_values[i])
    adjusted = [1.0] * m
    running = 0.0
    for rank, i in enumerate(order):
        running = max(running, min(1.0, (m - rank) * p_values[i]))
        adjusted[i] = running
    return adjusted


def mcnemar_vs_best(outcomes: Any) -> tuple[McNemarResult, ...]:
    """Test every residue against the best one (exact McNemar, Holm-corrected).

    Uses complete rows only; the best residue is the one with the highest
    accuracy on those rows (lowest residue on ties), so it is not in the result
    (``P - 1`` entries, in residue order). Because the reference is chosen as
    the empirical maximum, the comparisons are slightly optimistic under a flat
    truth; the exact test's conservatism and Holm's correction offset this (the
    false-positive rate is checked by simulation in the tests).
    With no complete row every p-value is 1.
    """
    arr = _complete_rows(as_outcomes(outcomes))
    k = arr.shape[1]
    rows = arr.shape[0]
    acc = arr.mean(axis=0) if rows else np.zeros(k)
    best = int(np.argmax(acc))
    raw = []
    for r in range(k):
        if r == best:
            continue
        b = int(np.sum((arr[:, best] == 1) & (arr[:, r] == 0)))
        c = int(np.sum((arr[:, best] == 0) & (arr[:, r] == 1)))
        raw.append((r, b, c, binom_two_sided_half(b, b + c)))
    holm = holm_adjust([p for *_, p in raw])
    return tuple(
        McNemarResult(
            residue=r,
            best_residue=best,
            n_pairs=rows,
            best_only=b,
            residue_only=c,
            accuracy=float(acc[r]),
            best_accuracy=float(acc[best]),
            p_value=p,
            p_holm=adj,
        )
        for (r, b, c, p), adj in zip(raw, holm, strict=True)
    )


def weak_residues(results: tuple[McNemarResult, ...], *, alpha: float = 0.05) -> tuple[int, ...]:
    """Residues significantly worse than the best: Holm-corrected p < ``alpha``."""
    if not 0 < alpha < 1:
        raise InputError(f"alpha must be a fraction in (0, 1), got {alpha}")
    return tuple(
        res.residue for res in results if res.p_holm < alpha and res.best_only > res.residue_only
    )
