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

numpy, and scipy's distributions through :mod:`.dist`. Every function returns new objects and never changes its
arguments. Accuracies, gaps and half-widths are fractions (0..1) unless a name
says "points" (percentage points, 0..100).
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

import numpy as np

from phaseaware.calibration.stats.outcomes import as_outcomes, complete_rows
from phaseaware.calibration.stats.paired import (
    CochranResult,
    McNemarResult,
    cochran_q,
    mcnemar_vs_best,
    weak_residues,
)
from phaseaware.calibration.stats.shrink import BetaPrior, beta_prior, shrink_accuracies
from phaseaware.errors import InputError
from phaseaware.intervals import Z_95, wilson_interval

__all__ = [
    "ResidueSummary",
    "CalibrationStats",
    "residue_summary",
    "bootstrap_gap_interval",
    "verdict",
    "calibration_stats",
]


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


# --------------------------------------------------------------------------- verdict


def _format_p(p: float) -> str:
    return "p < 0.001" if p < 0.001 else f"p = {p:.2g}"


def verdict(
    *,
    cochran: CochranResult,
    weak: tuple[int, ...],
    gap: float,
    gap_interval: tuple[float, float] | None,
    alpha: float = 0.05,
    level: float = 0.95,
) -> str:
    """One-line conclusion of a sweep (gap and interval as fractions, printed in points).

    Weak residues (Holm-corrected McNemar p < ``alpha``) with a significant Cochran's Q
    make the sweep "phase-sensitive"; a significant Cochran's Q alone reports an effect
    no single residue accounts for; otherwise "no significant phase effect" (weak
    residues McNemar names without Cochran's Q are listed, not called an effect: the
    verdict, :func:`~phaseaware.calibration.verdict.phase_verdict`, follows Cochran's Q).
    """
    q_text = f"Cochran's Q = {cochran.q:.1f}, {_format_p(cochran.p_value)}"
    gap_text = f"gap {100 * gap:.1f} points"
    if gap_interval is not None:
        low, high = gap_interval
        gap_text += f" [{100 * level:.0f}% CI {100 * low:.1f}, {100 * high:.1f}]"
    names = ", ".join(str(r) for r in weak)
    label = "residue" if len(weak) == 1 else "residues"
    if weak and not cochran.p_value < alpha:
        # the omnibus test decides; McNemar against the best residue (chosen after seeing
        # the data) alone must not make a line that contradicts it
        return (
            f"no significant phase effect ({q_text}); {label} {names} below the best by "
            f"Holm-corrected McNemar (p < {alpha:g}), against a best residue picked from the "
            f"data; {gap_text}"
        )
    if weak:
        return (
            f"phase-sensitive: weak {label} {names} "
            f"(Holm-corrected McNemar p < {alpha:g}); {gap_text}"
        )
    if cochran.p_value < alpha:
        return (
            f"phase effect ({q_text}) but no residue is significantly worse than the best "
            f"(Holm-corrected McNemar p >= {alpha:g}); {gap_text}"
        )
    return f"no significant phase effect ({q_text})"


@dataclass(frozen=True)
class CalibrationStats:
    """Everything the calibration reports about one sweep (see ``calibration_stats``).

    ``reliability`` holds the shrunken accuracies (fractions) for
    ``Profile.reliability``; ``n_complete_rows`` is how many base prompts the
    paired tests used.
    """

    summary: ResidueSummary
    gap_interval: tuple[float, float] | None
    cochran: CochranResult
    mcnemar: tuple[McNemarResult, ...]
    weak_residues: tuple[int, ...]
    reliability: tuple[float, ...]
    prior: BetaPrior
    n_complete_rows: int
    alpha: float
    verdict: str

    def to_dict(self) -> dict[str, Any]:
        """JSON-safe dict: plain ints/floats/strings/lists; NaN becomes ``None``."""
        s = self.summary
        return {
            "period": s.period,
            "n": list(s.n),
            "successes": list(s.successes),
            "accuracy": _floats(s.accuracy),
            "ci_low": _floats(s.ci_low),
            "ci_high": _floats(s.ci_high),
            "mean": _float(s.mean),
            "worst": _float(s.worst),
            "worst_residue": s.worst_residue,
            "best": _float(s.best),
            "best_residue": s.best_residue,
            "gap": _float(s.gap),
            "gap_interval": None if self.gap_interval is None else _floats(self.gap_interval),
            "cochran": {
                "q": _float(self.cochran.q),
                "df": int(self.cochran.df),
                "p_value": _float(self.cochran.p_value),
            },
            "mcnemar": [
                {key: _float(v) if isinstance(v, float) else v for key, v in vars(m).items()}
                for m in self.mcnemar
            ],
            "weak_residues": list(self.weak_residues),
            "reliability": _floats(self.reliability),
            "prior": {key: _float(v) for key, v in vars(self.prior).items()},
            "n_complete_rows": self.n_complete_rows,
            "alpha": self.alpha,
            "verdict": self.verdict,
        }


def _float(value: float) -> float | None:
    value = float(value)
    return value if math.isfinite(value) else None


def _floats(values: Any) -> list[float | None]:
    return [_float(v) for v in values]


def calibration_stats(
    outcomes: Any,
    *,
    alpha: float = 0.05,
    n_boot: int = 2000,
    seed: int = 0,
    level: float = 0.95,
) -> CalibrationStats:
    """Run every analysis on one sweep's ``outcomes`` (base prompts × residues).

    Raises ``InputError`` when ``outcomes`` hold no observed value.
    """
    arr = as_outcomes(outcomes)
    summary = residue_summary(arr)
    interval = bootstrap_gap_interval(arr, n_boot=n_boot, seed=seed, level=level)
    cochran = cochran_q(arr)
    tests = mcnemar_vs_best(arr)
    weak = weak_residues(tests, alpha=alpha)
    successes, n = np.array(summary.successes), np.array(summary.n)
    prior = beta_prior(successes, n)
    reliability = shrink_accuracies(successes, n)
    return CalibrationStats(
        summary=summary,
        gap_interval=interval,
        cochran=cochran,
        mcnemar=tests,
        weak_residues=weak,
        reliability=tuple(float(v) for v in reliability),
        prior=prior,
        n_complete_rows=int(complete_rows(arr).shape[0]),
        alpha=alpha,
        verdict=verdict(
            cochran=cochran,
            weak=weak,
            gap=summary.gap,
            gap_interval=interval,
            alpha=alpha,
            level=level,
        ),
    )
