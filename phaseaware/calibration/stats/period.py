"""Detect the period of a phase effect from accuracy measured at consecutive offsets.

Model ``M_p`` explains accuracy at offset ``o`` by its fold ``o mod p`` (one
accuracy per residue); ``M_1`` is flat accuracy. When ``d`` divides ``p``, ``M_d`` is
nested in ``M_p``, and a nested test asks whether folding by ``p`` explains
*significantly more* than folding by ``d``:

* from outcomes (base prompts × offsets, so counts are known): the binomial
  likelihood-ratio test, its statistic divided by the overdispersion of ``M_p``'s
  residuals when they vary more than binomially (Pearson, floored at 1), against
  chi-square with the difference in residue counts as degrees of freedom. Each
  fold's own binomial variance is used, so a residue at 100% (no noise) and one
  at 90% are compared fairly; offsets measured on the same base prompts
  correlate positively, which makes the test conservative;
* from accuracies alone: the extra-sum-of-squares F-test, residual from ``M_p``.

A candidate ``p`` in ``2..max_period`` passes when it beats **every** proper
divisor (1 included): its p-value is the largest of those tests (an
intersection-union test, valid without correction). A fold by a multiple of the
true period explains nothing beyond the true period's fold, so its test against
it is null: multiples never win on noise. The candidates' p-values are then
Holm-adjusted over the ``max_period - 1`` candidates, which bounds the chance of
reporting any period at all on flat accuracy by ``alpha``. Among the
significant candidates the reported period is the one that no other
significant candidate is a multiple of (a period-8 pattern may make 4
significant too, and 8 beats 4); if several such remain, the smallest
p-value wins.

Power: for every candidate, the probability that this test would have found it
at the level used, if the effect were the one observed (the candidate's fold
accuracies) and the noise that of the run: the noncentral chi-square (or F)
distribution, at the Holm first-step level ``alpha / (max_period - 1)``.
:func:`period_power` gives the same figure for a planned effect, which is how
:func:`~phaseaware.calibration.stats.plan.plan_calibration` sizes a run that
should find a gap at a given period.

Distributions from ``scipy.stats`` (through :mod:`.dist`).
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from typing import Any

import numpy as np

from phaseaware.calibration.stats.dist import chi2_isf, chi2_sf, f_isf, f_sf, ncf_sf, ncx2_sf
from phaseaware.calibration.stats.paired import holm_adjust
from phaseaware.errors import InputError

__all__ = [
    "PeriodDetection",
    "detect_period",
    "detect_period_at_positions",
    "unconfirmed",
    "period_power",
    "TEST",
]

TEST = "nested test of the fold by p against each of its divisors, Holm over candidates"


@dataclass(frozen=True)
class PeriodDetection:
    """Result of ``detect_period``.

    ``period`` is ``None`` when no candidate is significant at ``alpha``;
    ``candidate`` is the period that would be reported regardless (the smallest
    adjusted p-value). ``p_value`` is the candidate's Holm-adjusted p-value.
    ``strength`` is the fraction of the between-offset variance the candidate's
    fold explains (R², 0..1). Per candidate period: ``scores`` (R² of its fold),
    ``p_values`` (Holm-adjusted nested p-values) and ``power`` (the power the run
    had to find it at the observed effect, see the module docstring).
    """

    period: int | None
    candidate: int
    strength: float
    p_value: float
    scores: dict[int, float] = field(hash=False)
    p_values: dict[int, float] = field(default_factory=dict, hash=False)
    power: dict[int, float] = field(default_factory=dict, hash=False)
    alpha: float = 0.05
    test: str = TEST
    #: why a significant candidate is not reported (see :func:`unconfirmed`), else ""
    note: str = ""


def unconfirmed(detection: PeriodDetection, *, test: str, p_value: float) -> PeriodDetection:
    """``detection`` with its period withdrawn: the residue test at that period (``test``,
    ``p_value`` >= alpha) did not confirm it, and a report must not print a detected period
    above a test that finds nothing there. The candidate stays, untested."""
    return replace(
        detection,
        period=None,
        note=(
            f"period {detection.period} passed the detection but {test} at it gave "
            f"p = {p_value:.2g}: not confirmed"
        ),
    )


def _counts_by_offset(values: Any) -> tuple[np.ndarray, np.ndarray | None]:
    """(successes or accuracies, trials or ``None``) per offset; NaN where nothing was measured."""
    arr = np.array(values, dtype=float, copy=True)
    if arr.ndim == 2:  # outcomes: base prompts x offsets, -1/NaN = missing
        arr[arr == -1] = np.nan
        observed = ~np.isnan(arr)
        counts = observed.sum(axis=0).astype(float)
        sums = np.where(observed, arr, 0.0).sum(axis=0)
        return np.where(counts > 0, sums, np.nan), counts
    if arr.ndim != 1:
        raise InputError(
            f"pass accuracy by offset (1-D) or outcomes by offset (2-D), got shape {arr.shape}"
        )
    return arr, None


def _fold(
    y: np.ndarray, offsets: np.ndarray, period: int, weights: np.ndarray | None = None
) -> tuple[np.ndarray, int]:
    """Fitted values of the fold by ``period`` (weighted residue means of ``y``; with
    ``weights`` = trials and ``y`` = successes, the residues' accuracies) and its group count."""
    groups = offsets % period
    present, index = np.unique(groups, return_inverse=True)
    w = np.ones_like(y) if weights is None else weights
    sums = np.bincount(index, weights=y, minlength=present.size)
    counts = np.bincount(index, weights=w, minlength=present.size)
    return (sums / counts)[index], int(present.size)


def _divisors(p: int) -> list[int]:
    return [d for d in range(1, p) if p % d == 0]


def _f_test(
    fits: dict[int, tuple[np.ndarray, int]], y: np.ndarray, p: int, d: int, level: float
) -> tuple[float, float]:
    """(p-value, power at ``level``) of the nested F-test: fold by ``p`` against fold by ``d``."""
    fit_p, k_p = fits[p]
    fit_d, k_d = fits[d]
    dfn, dfd = k_p - k_d, y.size - k_p
    rss_p = float(np.sum((y - fit_p) ** 2))
    extra = float(np.sum((fit_p - fit_d) ** 2))  # = RSS_d - RSS_p (orthogonal projections)
    tiny = 1e-12 * max(float(np.sum((y - y.mean()) ** 2)), 1e-300)
    if dfn <= 0 or extra <= tiny:
        return 1.0, 0.0
    if rss_p <= tiny:  # noise-free and a real difference
        return 0.0, 1.0
    scale = rss_p / dfd
    power = ncf_sf(f_isf(level, dfn, dfd), dfn, dfd, extra / scale)
    return f_sf((extra / dfn) / scale, dfn, dfd), power


def _bernoulli_kl(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """KL(Bernoulli(a) || Bernoulli(b)) elementwise, 0 log 0 = 0 (b in (0, 1) where a differs)."""
    with np.errstate(divide="ignore", invalid="ignore"):
        hit = np.where(a > 0, a * np.log(a / b), 0.0)
        miss = np.where(a < 1, (1 - a) * np.log((1 - a) / (1 - b)), 0.0)
    return np.asarray(hit + miss)


def _dispersion(successes: np.ndarray, n: np.ndarray, fit: np.ndarray, df: int) -> float:
    """Pearson overdispersion of the fold ``fit`` (at least 1: binomial noise is the floor)."""
    inside = (fit > 0) & (fit < 1)
    resid = (successes - n * fit)[inside] ** 2 / (n * fit * (1 - fit))[inside]
    return max(1.0, float(resid.sum()) / df) if df > 0 else 1.0


def _lr_test(
    fits: dict[int, tuple[np.ndarray, int]],
    successes: np.ndarray,
    n: np.ndarray,
    p: int,
    d: int,
    level: float,
) -> tuple[float, float]:
    """(p-value, power at ``level``) of the binomial likelihood-ratio test, fold ``p`` vs ``d``."""
    fit_p, k_p = fits[p]
    fit_d, k_d = fits[d]
    dfn = k_p - k_d
    if dfn <= 0:
        return 1.0, 0.0
    stat = 2.0 * float(np.sum(n * _bernoulli_kl(fit_p, fit_d)))
    stat /= _dispersion(successes, n, fit_p, successes.size - k_p)
    if not stat > 1e-9:
        return 1.0, 0.0
    return chi2_sf(stat, dfn), ncx2_sf(chi2_isf(level, dfn), dfn, stat)


def detect_period(
    accuracy_by_offset: Any,
    *,
    max_period: int,
    alpha: float = 0.05,
) -> PeriodDetection:
    """Find the period of accuracy measured at offsets 0..L-1 (see the module docstring).

    ``accuracy_by_offset``: fractions, one per offset (NaN = not measured), or
    a 2-D 0/1 outcome array (base prompts × offsets; NaN/-1 = missing), which
    is reduced to per-offset accuracy. Needs more measured offsets than
    ``max_period``; two full cycles of the largest candidate are advisable.
    The offsets must be the positions themselves (or all shifted by one
    constant): a fold of positions by some modulus cannot be tested for a
    period that does not divide it; use :func:`detect_period_at_positions`.
    Deterministic: no permutation, no random numbers.
    """
    _check(max_period, alpha)
    values, trials = _counts_by_offset(accuracy_by_offset)
    measured = ~np.isnan(values)
    offsets = np.flatnonzero(measured)
    y = values[measured]
    n = None if trials is None else trials[measured]
    return _detect(y, n, offsets, max_period=max_period, alpha=alpha, what="offsets")


def detect_period_at_positions(
    positions: Any,
    correct: Any,
    *,
    max_period: int,
    alpha: float = 0.05,
) -> PeriodDetection:
    """Find the period of 0/1 outcomes observed at absolute token ``positions``.

    Every candidate ``p`` in ``2..max_period`` is tested on ``position mod p``
    itself, so any period up to ``max_period`` is found whether or not it
    divides another candidate (a fold by 16 first would hide 3, 5, 6 or 12).
    Outcomes are pooled per distinct position (successes of trials) and tested
    as :func:`detect_period` tests its offsets. ``correct``: 0/1 (or booleans),
    NaN = not measured. Needs more distinct measured positions than ``max_period``.
    """
    _check(max_period, alpha)
    pos = np.asarray(positions, dtype=np.int64).ravel()
    ok = np.asarray(correct, dtype=float).ravel()
    if pos.shape != ok.shape:
        raise InputError(f"positions ({pos.size}) and outcomes ({ok.size}) differ in length")
    keep = ~np.isnan(ok)
    if (pos[keep] < 0).any():
        raise InputError("positions must be token indices >= 0")
    unique, index = np.unique(pos[keep], return_inverse=True)
    successes = np.bincount(index, weights=ok[keep], minlength=unique.size)
    trials = np.bincount(index, minlength=unique.size).astype(float)
    return _detect(
        successes, trials, unique, max_period=max_period, alpha=alpha, what="distinct positions"
    )


def _check(max_period: int, alpha: float) -> None:
    if isinstance(max_period, bool) or not isinstance(max_period, int) or max_period < 2:
        raise InputError(f"max_period must be an int >= 2, got {max_period!r}")
    if not 0 < alpha < 1:
        raise InputError(f"alpha must be a fraction in (0, 1), got {alpha}")


def _detect(
    y: np.ndarray,
    n: np.ndarray | None,
    offsets: np.ndarray,
    *,
    max_period: int,
    alpha: float,
    what: str,
) -> PeriodDetection:
    """The nested tests over candidates ``2..max_period`` (``n is None``: ``y`` are accuracies,
    F-tests; else ``y`` successes of ``n`` trials, likelihood-ratio tests)."""
    if y.size <= max_period:
        raise InputError(
            f"only {y.size} measured {what} for max_period={max_period}; measure more "
            f"{what} (at least 2 * max_period) or lower max_period"
        )
    periods = list(range(2, max_period + 1))
    fits = {p: _fold(y, offsets, p, n) for p in range(1, max_period + 1)}
    acc = y if n is None else y / n
    # the spread of the fitted values around the mean, weighted by trials
    w = np.ones_like(acc) if n is None else n
    mean = float(np.sum(w * acc) / np.sum(w))
    total = float(np.sum(w * (acc - mean) ** 2))
    scores = {
        p: float(np.sum(w * (fits[p][0] - mean) ** 2)) / total if total > 0 else 0.0
        for p in periods
    }
    level = alpha / len(periods)
    if not np.ptp(acc) > 0:  # constant accuracy: nothing to explain
        ones = dict.fromkeys(periods, 1.0)
        return PeriodDetection(None, 2, 0.0, 1.0, scores, ones, dict.fromkeys(periods, 0.0), alpha)
    raw: list[float] = []
    power: dict[int, float] = {}
    for p in periods:
        if n is None:
            tests = [_f_test(fits, y, p, d, level) for d in _divisors(p)]
        else:
            tests = [_lr_test(fits, y, n, p, d, level) for d in _divisors(p)]
        raw.append(max(t[0] for t in tests))
        power[p] = min(t[1] for t in tests)
    adjusted = dict(zip(periods, holm_adjust(raw), strict=True))
    candidate = min(periods, key=lambda p: (adjusted[p], p))
    significant = [p for p in periods if adjusted[p] < alpha]
    maximal = [p for p in significant if not any(q != p and q % p == 0 for q in significant)]
    period = min(maximal, key=lambda p: (adjusted[p], p)) if maximal else None
    if period is not None:
        candidate = period
    return PeriodDetection(
        period=period,
        candidate=candidate,
        strength=scores[candidate],
        p_value=adjusted[candidate],
        scores=scores,
        p_values=adjusted,
        power=power,
        alpha=alpha,
    )


def period_power(
    accuracy_by_residue: Any,
    *,
    n_base_prompts: int,
    n_offsets: int,
    max_period: int,
    alpha: float = 0.05,
) -> float:
    """Power of :func:`detect_period` to find the period of ``accuracy_by_residue``.

    The planned effect is one accuracy per residue (fractions; its length is the
    period); a sweep of ``n_offsets`` consecutive offsets measures each with
    ``n_base_prompts`` probes (each base prompt at its own key positions, so the
    run holds ``n_base_prompts * n_offsets`` distinct positions; candidates up to
    ``max_period <= n_offsets``, as :func:`detect_period_at_positions` tests them). The power is that of the likelihood-ratio test
    against the hardest divisor, at the Holm first-step level
    ``alpha / (max_period - 1)`` (the noncentral chi-square, binomial noise, the
    noncentrality divided by the mean of the test's dispersion floor;
    outcomes of one base prompt at different offsets taken as independent,
    conservative when they correlate positively).
    """
    acc = np.asarray(accuracy_by_residue, dtype=float)
    period = int(acc.size)
    if not 2 <= period <= max_period <= n_offsets:
        raise InputError(
            f"need 2 <= period ({period}) <= max_period ({max_period}) <= n_offsets ({n_offsets})"
        )
    if n_base_prompts < 1:
        raise InputError(f"n_base_prompts must be >= 1, got {n_base_prompts}")
    offsets = np.arange(n_offsets)
    mean = acc[offsets % period]
    level = alpha / (max_period - 1)
    # the test divides by the residuals' dispersion floored at 1; its mean under binomial
    # noise, E[max(1, X / df)] for X chi-square(df), = P(X <= df) + P(chi-square(df + 2) > df)
    df = n_base_prompts * n_offsets - period  # base prompts sit at distinct positions
    floor = 1.0 - chi2_sf(df, df) + chi2_sf(df, df + 2)
    powers = []
    for d in _divisors(period):
        fit_d, k_d = _fold(mean, offsets, d)
        dfn = period - k_d
        noncentrality = 2.0 * n_base_prompts * float(np.sum(_bernoulli_kl(mean, fit_d))) / floor
        if not noncentrality > 0:
            return 0.0
        powers.append(ncx2_sf(chi2_isf(level, dfn), dfn, noncentrality))
    return min(powers)
