"""The distribution functions the statistics need, from ``scipy.stats``.

scipy is an extra (``pip install -e '.[stats]'``; the ``reference`` extra
includes it): it is imported on the first call, never at import time, so
``import phaseaware`` stays light. Without it every function here raises
:class:`~phaseaware.errors.MissingExtraError` naming the install line.
A hand-written version of the same tails lives in the tests as their oracle.
"""

from __future__ import annotations

import importlib
from types import ModuleType
from typing import Any

import numpy as np

from phaseaware.errors import MissingExtraError
from phaseaware.extras import missing_message

__all__ = [
    "scipy_stats",
    "chi2_sf",
    "f_sf",
    "ncf_sf",
    "f_isf",
    "chi2_isf",
    "ncx2_sf",
    "binom_two_sided_half",
    "binom_pmf",
]


def scipy_stats() -> ModuleType:
    """``scipy.stats``, imported on first use (``MissingExtraError`` naming the install)."""
    try:
        stats: ModuleType = importlib.import_module("scipy.stats")
    except ModuleNotFoundError as exc:
        if (exc.name or "").split(".")[0] != "scipy":
            raise
        raise MissingExtraError(
            missing_message("scipy", what="phaseaware's statistics (calibrate, compare, score)")
        ) from None
    return stats


def chi2_sf(x: float, df: int | float) -> float:
    """P(X >= x) for X chi-square with ``df > 0`` degrees of freedom."""
    if not df > 0:
        raise ValueError(f"df must be > 0, got {df!r}")
    return 1.0 if x <= 0 else float(scipy_stats().chi2.sf(x, df))


def chi2_isf(q: float, df: int | float) -> float:
    """The critical value c with P(X >= c) = ``q`` for X chi-square with ``df`` degrees of freedom."""
    return float(scipy_stats().chi2.isf(q, df))


def ncx2_sf(x: float, df: int | float, noncentrality: float) -> float:
    """P(X >= x) for X noncentral chi-square (``df``, ``noncentrality``) (a test's power)."""
    if noncentrality <= 0:
        return chi2_sf(x, df)
    return float(scipy_stats().ncx2.sf(x, df, noncentrality))


def f_sf(x: float, dfn: int | float, dfd: int | float) -> float:
    """P(X >= x) for X ~ F(``dfn``, ``dfd``)."""
    return 1.0 if x <= 0 else float(scipy_stats().f.sf(x, dfn, dfd))


def f_isf(q: float, dfn: int | float, dfd: int | float) -> float:
    """The critical value c with P(X >= c) = ``q`` for X ~ F(``dfn``, ``dfd``)."""
    return float(scipy_stats().f.isf(q, dfn, dfd))


def ncf_sf(x: float, dfn: int | float, dfd: int | float, noncentrality: float) -> float:
    """P(X >= x) for X noncentral F(``dfn``, ``dfd``, ``noncentrality``) (a test's power)."""
    if noncentrality <= 0:
        return f_sf(x, dfn, dfd)
    return float(scipy_stats().ncf.sf(x, dfn, dfd, noncentrality))


def binom_two_sided_half(k: int, n: int) -> float:
    """Exact two-sided p-value of ``k`` successes in ``n`` trials under p = 1/2
    (the exact McNemar test on ``k`` of ``n`` discordant pairs); 1 when ``n == 0``."""
    if n < 0 or not 0 <= k <= n:
        raise ValueError(f"need 0 <= k <= n, got k={k}, n={n}")
    if n == 0:
        return 1.0
    return float(scipy_stats().binomtest(int(k), int(n), 0.5).pvalue)


def binom_pmf(k: Any, n: int, p: float) -> np.ndarray:
    """P(X = k) for X ~ Binomial(``n``, ``p``), vectorized over ``k``."""
    return np.asarray(scipy_stats().binom.pmf(np.asarray(k), n, p), dtype=float)
