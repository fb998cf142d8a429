"""Detect the period of a phase effect from accuracy measured at consecutive offsets.

For each candidate period ``p`` in ``2..max_period`` the accuracies are folded
by ``offset mod p`` and scored by the *adjusted* R² of that grouping (the
fraction of the between-offset variance the residue-mod-p means explain,
corrected for the number of groups, so that finer foldings do not win merely
by fitting noise). The reported period is the smallest candidate whose score
is within ``tolerance`` (relative) of the best score: a period-4 effect also
"explains" folds by 8 and 12, and those ties go to 4.

Significance: a permutation test over offsets (the accuracies are shuffled
across offsets ``n_perm`` times with ``np.random.default_rng(seed)``); the test
statistic is the best adjusted R² over all candidates, so the choice among
candidates is accounted for.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import numpy as np

from phaseaware.errors import InputError

__all__ = ["PeriodDetection", "detect_period"]


@dataclass(frozen=True)
class PeriodDetection:
    """Result of ``detect_period``.

    ``period`` is ``None`` when no periodic effect is significant at ``alpha``;
    ``candidate`` is the period that would be reported regardless.
    ``strength`` is the candidate's adjusted R² (fraction of between-offset
    variance explained, at most 1; may be < 0 for pure noise). ``scores``
    maps every candidate period to its adjusted R².
    """

    period: int | None
    candidate: int
    strength: float
    p_value: float
    scores: dict[int, float] = field(hash=False)


def _accuracy_by_offset(values: Any) -> np.ndarray:
    arr = np.array(values, dtype=float, copy=True)
    if arr.ndim == 2:  # outcomes: base prompts x offsets, -1/NaN = missing
        arr[arr == -1] = np.nan
        observed = ~np.isnan(arr)
        counts = observed.sum(axis=0)
        sums = np.where(observed, arr, 0.0).sum(axis=0)
        with np.errstate(invalid="ignore", divide="ignore"):
            return np.where(counts > 0, sums / np.maximum(counts, 1), np.nan)
    if arr.ndim != 1:
        raise InputError(
            f"pass accuracy by offset (1-D) or outcomes by offset (2-D), got shape {arr.shape}"
        )
    return arr


def _adjusted_r2(y: np.ndarray, offsets: np.ndarray, period: int) -> np.ndarray:
    """Adjusted R² of grouping by ``offsets % period``, for each row of ``y``."""
    n = offsets.size
    groups = offsets % period
    present = np.unique(groups)
    onehot = (groups[:, None] == present[None, :]).astype(float)
    counts = onehot.sum(axis=0)
    centered = y - y.mean(axis=1, keepdims=True)
    ss_total = np.sum(centered**2, axis=1)
    ss_between = np.sum((centered @ onehot) ** 2 / counts, axis=1)
    with np.errstate(invalid="ignore", divide="ignore"):
        r2 = np.where(ss_total > 0, ss_between / ss_total, 0.0)
    return 1.0 - (1.0 - r2) * (n - 1) / (n - present.size)


def detect_period(
    accuracy_by_offset: Any,
    *,
    max_period: int,
    n_perm: int = 999,
    seed: int = 0,
    alpha: float = 0.05,
    tolerance: float = 0.1,
) -> PeriodDetection:
    """Find the period of accuracy measured at offsets 0..L-1.

    ``accuracy_by_offset``: fractions, one per offset (NaN = not measured), or
    a 2-D 0/1 outcome array (base prompts × offsets; NaN/-1 = missing), which
    is reduced to per-offset accuracy. Needs more measured offsets than
    ``max_period``; two full cycles of the largest candidate are advisable.
    """
    if isinstance(max_period, bool) or not isinstance(max_period, int) or max_period < 2:
        raise InputError(f"max_period must be an int >= 2, got {max_period!r}")
    if n_perm < 1:
        raise InputError(f"n_perm must be >= 1, got {n_perm}")
    if not 0 < alpha < 1 or not 0 <= tolerance < 1:
        raise InputError("alpha must be in (0, 1) and tolerance in [0, 1)")
    acc = _accuracy_by_offset(accuracy_by_offset)
    measured = ~np.isnan(acc)
    offsets = np.flatnonzero(measured)
    y = acc[measured]
    if y.size <= max_period:
        raise InputError(
            f"only {y.size} measured offsets for max_period={max_period}; measure more "
            "offsets (at least 2 * max_period) or lower max_period"
        )
    periods = list(range(2, max_period + 1))
    rng = np.random.default_rng(seed)
    sample = np.vstack([y[None, :], rng.permuted(np.tile(y, (n_perm, 1)), axis=1)])
    table = np.column_stack([_adjusted_r2(sample, offsets, p) for p in periods])
    observed = table[0]
    best = float(observed.max())
    scores = {p: float(s) for p, s in zip(periods, observed, strict=True)}
    if not np.var(y) > 0:  # constant accuracy: nothing to explain
        candidate = periods[int(np.argmax(observed))]
        return PeriodDetection(None, candidate, scores[candidate], 1.0, scores)
    threshold = best - tolerance * abs(best)
    candidate = next(p for p in periods if scores[p] >= threshold)
    null_max = table[1:].max(axis=1)
    p_value = float((1 + np.sum(null_max >= best - 1e-12)) / (n_perm + 1))
    period = candidate if p_value < alpha else None
    return PeriodDetection(period, candidate, scores[candidate], p_value, scores)
