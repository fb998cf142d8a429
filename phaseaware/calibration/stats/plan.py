"""How many base prompts a calibration needs, and what it costs.

Two targets, either or both (the larger requirement wins):

* ``target_half_width``: the Wilson 95% interval of each residue's accuracy
  should be at most this wide on each side (fraction) at ``baseline_accuracy``.
  Every base prompt gives one probe per residue, so n per residue = number of
  base prompts.
* ``detect_gap``: a residue whose accuracy is ``detect_gap`` (fraction) below
  the others should be flagged by ``mcnemar_vs_best`` with probability
  ``power``. Power is computed *exactly* for the exact McNemar test at the
  Bonferroni level ``alpha / (period (period - 1) / 2)`` (what Holm, over the
  family of all residue pairs that ``mcnemar_vs_best`` uses, applies to the
  smallest p-value), counting only rejections in the right
  direction.

* ``detect_gap`` with ``gap_period``: for a sweep whose period is detected
  (``--period auto``: ``period`` offsets, candidates up to ``max_period``), a
  residue ``detect_gap`` below the others, repeating every ``gap_period``
  offsets, should be found as period ``gap_period`` by
  :func:`~phaseaware.calibration.stats.period.detect_period` with probability
  ``power`` (:func:`~phaseaware.calibration.stats.period.period_power`).

Discordance model (the assumption behind ``detect_gap``): within a base
prompt, the outcome at the best residue (accuracy ``baseline_accuracy``) and
at the weak residue (``baseline_accuracy - detect_gap``) are *independent*, so
discordant pairs occur with probability p10 + p01 = pb(1-pw) + (1-pb)pw. Real
outcomes of the same base prompt are usually positively correlated (an easy
prompt is easy at every residue), which lowers discordance and raises power:
under that usual case the plan is conservative. The reference residue in the
actual test is the empirical best, which is at least as good as a fixed one.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass
from statistics import NormalDist

import numpy as np

from phaseaware.calibration.stats.dist import binom_pmf, scipy_stats
from phaseaware.calibration.stats.period import period_power
from phaseaware.errors import InputError
from phaseaware.intervals import Z_95

__all__ = ["CalibrationPlan", "plan_calibration", "wilson_half_width", "mcnemar_power"]

_MAX_BASE_PROMPTS = 1_000_000


@dataclass(frozen=True)
class CalibrationPlan:
    """A calibration size: base prompts, probes (= base prompts × period × sweeps),
    tokens (= probes × tokens per probe), cost (currency units, ``None`` if no price),
    and the reasoning in words. ``half_width``/``power`` are what the plan achieves
    (``None`` for a target that was not asked for)."""

    n_base_prompts: int
    n_probes: int
    total_tokens: int
    estimated_cost: float | None
    rationale: str
    half_width: float | None = None
    power: float | None = None


def wilson_half_width(accuracy: float, n: int, *, z: float = Z_95) -> float:
    """Half-width (fraction) of the Wilson interval at observed ``accuracy`` with ``n`` trials."""
    z2 = z * z
    return (z / (1.0 + z2 / n)) * math.sqrt(accuracy * (1 - accuracy) / n + z2 / (4.0 * n * n))


def mcnemar_power(*, n: int, p_best: float, p_weak: float, alpha: float) -> float:
    """Probability that the exact McNemar test rejects at level ``alpha`` (two-sided,
    p < alpha) *with the weak residue worse*, over ``n`` independent-pair base prompts."""
    p10 = p_best * (1 - p_weak)  # right at best, wrong at weak
    p01 = (1 - p_best) * p_weak
    psi = p10 + p01
    if psi <= 0 or p10 <= p01:
        return 0.0
    share = p10 / psi
    stats = scipy_stats()
    m_all = np.arange(n + 1)
    weight = binom_pmf(m_all, n, psi)
    power = 0.0
    for m in np.flatnonzero(weight > 1e-13):
        if m == 0:
            continue
        # reject when 2 P(X <= min(b, c)) < alpha under X ~ Bin(m, 1/2): k <= k_crit
        k_crit = int(stats.binom.ppf(alpha / 2.0, m, 0.5))
        while k_crit >= 0 and 2.0 * float(stats.binom.cdf(k_crit, m, 0.5)) >= alpha:
            k_crit -= 1
        if k_crit < 0:
            continue
        # the weak residue is worse: c (right only at the weak one) <= k_crit
        power += weight[m] * float(stats.binom.cdf(k_crit, m, 1.0 - share))
    return min(1.0, power)


def _smallest_n(meets: Callable[[int], bool], start: int) -> int:
    """Smallest n (by doubling, then bisection) for which ``meets(n)`` holds."""
    high = max(1, start)
    while not meets(high):
        if high >= _MAX_BASE_PROMPTS:
            raise InputError(
                f"the target needs more than {_MAX_BASE_PROMPTS} base prompts; "
                "loosen --target-half-width / --detect-gap"
            )
        high = min(2 * high, _MAX_BASE_PROMPTS)
    low = 0
    while high - low > 1:
        mid = (low + high) // 2
        if mid >= 1 and meets(mid):
            high = mid
        else:
            low = mid
    return high


def _check(
    period: int,
    target_half_width: float | None,
    detect_gap: float | None,
    baseline_accuracy: float,
    alpha: float,
    power: float,
    tokens: int,
) -> None:
    if isinstance(period, bool) or not isinstance(period, int) or period < 1:
        raise InputError(f"period must be an int >= 1, got {period!r}")
    if isinstance(tokens, bool) or not isinstance(tokens, int) or tokens < 1:
        raise InputError(f"tokens_per_probe must be an int >= 1, got {tokens!r}")
    if target_half_width is None and detect_gap is None:
        raise InputError("give target_half_width and/or detect_gap to size the calibration")
    if not 0 < baseline_accuracy <= 1:
        raise InputError(f"baseline_accuracy must be in (0, 1], got {baseline_accuracy}")
    if not (0 < alpha < 1 and 0 < power < 1):
        raise InputError(f"alpha and power must be in (0, 1), got {alpha}, {power}")
    if target_half_width is not None and not 0 < target_half_width <= 0.5:
        raise InputError(f"target_half_width must be in (0, 0.5], got {target_half_width}")
    if detect_gap is not None:
        if period < 2:
            raise InputError("detect_gap needs period >= 2 (there is nothing to compare)")
        if not 0 < detect_gap <= baseline_accuracy:
            raise InputError(
                f"detect_gap must be in (0, baseline_accuracy={baseline_accuracy}], "
                f"got {detect_gap}"
            )


def plan_calibration(
    *,
    period: int,
    target_half_width: float | None = None,
    detect_gap: float | None = None,
    baseline_accuracy: float = 0.8,
    alpha: float = 0.05,
    power: float = 0.8,
    tokens_per_probe: int,
    price_per_million_tokens: float | None = None,
    sweeps: tuple[str, ...] = ("key",),
    gap_period: int | None = None,
    max_period: int | None = None,
) -> CalibrationPlan:
    """Size a calibration (see the module docstring for the model and its assumption).

    Accuracies, half-widths and gaps are fractions; ``tokens_per_probe`` counts
    prompt plus completion tokens; ``price_per_million_tokens`` in any currency.
    ``gap_period`` (with ``detect_gap``): size a period-detecting sweep of
    ``period`` offsets (candidates up to ``max_period``, default ``period``)
    so that a gap repeating every ``gap_period`` offsets is found.
    """
    _check(period, target_half_width, detect_gap, baseline_accuracy, alpha, power, tokens_per_probe)
    if not sweeps:
        raise InputError("sweeps must name at least one sweep, e.g. ('key',)")
    if price_per_million_tokens is not None and price_per_million_tokens < 0:
        raise InputError(f"price_per_million_tokens must be >= 0, got {price_per_million_tokens}")
    reasons, n_needed = [], 1
    achieved_half = achieved_power = None
    if target_half_width is not None:
        p = baseline_accuracy
        start = math.ceil(Z_95**2 * max(p * (1 - p), 1e-4) / target_half_width**2)
        n_hw = _smallest_n(lambda n: wilson_half_width(p, n) <= target_half_width, start)
        achieved_half = wilson_half_width(p, n_hw)
        n_needed = max(n_needed, n_hw)
        reasons.append(
            f"{n_hw} base prompts give a Wilson 95% half-width of {100 * achieved_half:.1f} "
            f"points (target {100 * target_half_width:.1f}) at accuracy {100 * p:.0f}%"
        )
    if detect_gap is not None and gap_period is not None:
        n_gap, achieved_power, reason = _plan_period(
            offsets=period,
            gap_period=gap_period,
            max_period=max_period if max_period is not None else period,
            detect_gap=detect_gap,
            baseline_accuracy=baseline_accuracy,
            alpha=alpha,
            power=power,
        )
        n_needed = max(n_needed, n_gap)
        reasons.append(reason)
    elif detect_gap is not None:
        n_gap, achieved_power, reason = _plan_mcnemar(
            period=period,
            detect_gap=detect_gap,
            baseline_accuracy=baseline_accuracy,
            alpha=alpha,
            power=power,
        )
        n_needed = max(n_needed, n_gap)
        reasons.append(reason)
    n_probes = n_needed * period * len(sweeps)
    total_tokens = n_probes * tokens_per_probe
    cost = (
        None if price_per_million_tokens is None else total_tokens / 1e6 * price_per_million_tokens
    )
    reasons.append(
        f"{n_needed} base prompts x {period} residues x {len(sweeps)} sweep(s) "
        f"({', '.join(sweeps)}) = {n_probes} probes x {tokens_per_probe} tokens = "
        f"{total_tokens} tokens"
    )
    return CalibrationPlan(
        n_base_prompts=n_needed,
        n_probes=n_probes,
        total_tokens=total_tokens,
        estimated_cost=cost,
        rationale="; ".join(reasons),
        half_width=achieved_half,
        power=None if achieved_power is None else float(achieved_power),
    )


def _plan_mcnemar(
    *, period: int, detect_gap: float, baseline_accuracy: float, alpha: float, power: float
) -> tuple[int, float, str]:
    """Base prompts for ``mcnemar_vs_best`` to flag a residue ``detect_gap`` below the rest."""
    pb, pw = baseline_accuracy, baseline_accuracy - detect_gap
    n_pairs = period * (period - 1) // 2
    level = alpha / n_pairs
    psi = pb * (1 - pw) + (1 - pb) * pw
    dist = NormalDist()
    z_a, z_b = dist.inv_cdf(1 - level / 2), dist.inv_cdf(power)
    start = math.ceil(
        (z_a * math.sqrt(psi) + z_b * math.sqrt(max(psi - detect_gap**2, 0))) ** 2 / detect_gap**2
    )

    def meets(n: int) -> bool:
        return mcnemar_power(n=n, p_best=pb, p_weak=pw, alpha=level) >= power

    n_gap = _smallest_n(meets, start)
    achieved = mcnemar_power(n=n_gap, p_best=pb, p_weak=pw, alpha=level)
    reason = (
        f"{n_gap} base prompts detect a residue {100 * detect_gap:.1f} points below "
        f"{100 * pb:.0f}% with power {100 * achieved:.0f}% (exact McNemar at "
        f"alpha {alpha:g}/{n_pairs} as Holm's first step; outcomes at different "
        "residues assumed independent, conservative when they correlate positively)"
    )
    return n_gap, achieved, reason


def _plan_period(
    *,
    offsets: int,
    gap_period: int,
    max_period: int,
    detect_gap: float,
    baseline_accuracy: float,
    alpha: float,
    power: float,
) -> tuple[int, float, str]:
    """Base prompts for ``detect_period`` to find a gap repeating every ``gap_period`` offsets."""
    if not 2 <= gap_period <= max_period <= offsets:
        raise InputError(
            f"gap_period must be in [2, max_period={max_period}] and max_period at most the "
            f"{offsets} offsets swept, got gap_period={gap_period}; sweep more offsets "
            "(--max-period) or ask for a shorter period"
        )
    pattern = [baseline_accuracy] * (gap_period - 1) + [baseline_accuracy - detect_gap]

    def achieved(n: int) -> float:
        return period_power(
            pattern, n_base_prompts=n, n_offsets=offsets, max_period=max_period, alpha=alpha
        )

    n_gap = _smallest_n(lambda n: achieved(n) >= power, 1)
    value = achieved(n_gap)
    reason = (
        f"{n_gap} base prompts find period {gap_period} when one residue in {gap_period} is "
        f"{100 * detect_gap:.1f} points below {100 * baseline_accuracy:.0f}% with power "
        f"{100 * value:.0f}% ({offsets} offsets, candidates 2-{max_period}, "
        f"alpha {alpha:g}/{max_period - 1} as Holm's first step; binomial noise)"
    )
    return n_gap, value, reason
