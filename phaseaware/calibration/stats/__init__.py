"""Statistics of a calibration sweep, one module per job.

``summary`` (accuracy by residue, the gap, the verdict, :func:`calibration_stats`),
``paired`` (Cochran's Q, McNemar against the best residue, Holm), ``period``
(period detection), ``shrink`` (beta-binomial shrinkage), ``plan`` (sample size and
cost), ``window`` (the window sweep), ``outcomes`` (the outcome matrix) and ``dist``
(the distributions, from ``scipy.stats``, imported on first use: the ``stats`` extra).
numpy at import time. The names below are the public API.
"""

from __future__ import annotations

from phaseaware.calibration.stats.outcomes import as_outcomes
from phaseaware.calibration.stats.paired import (
    CochranResult,
    McNemarResult,
    cochran_q,
    holm_adjust,
    mcnemar_vs_best,
    weak_residues,
)
from phaseaware.calibration.stats.period import (
    PeriodDetection,
    detect_period,
    detect_period_at_positions,
)
from phaseaware.calibration.stats.plan import CalibrationPlan, plan_calibration
from phaseaware.calibration.stats.shrink import BetaPrior, beta_prior, shrink_accuracies
from phaseaware.calibration.stats.summary import (
    CalibrationStats,
    ResidueSummary,
    bootstrap_gap_interval,
    calibration_stats,
    residue_summary,
    verdict,
)

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
    "holm_adjust",
    "beta_prior",
    "shrink_accuracies",
    "detect_period",
    "detect_period_at_positions",
    "plan_calibration",
    "verdict",
    "calibration_stats",
]
