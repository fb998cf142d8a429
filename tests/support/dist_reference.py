"""Hand-written distribution tails: the test oracle for :mod:`phaseaware.calibration.stats.dist`.

The library takes these from ``scipy.stats``; this slow, independent version
(no scipy) cross-checks it, as tiktoken's ``_educational`` checks its fast path.

* ``chi2_sf``: chi-square survival function through the regularized upper
  incomplete gamma function Q(a, x) (series for x < a + 1, Lentz continued
  fraction otherwise; relative accuracy about 1e-14).
* ``binom_two_sided_half``: exact two-sided binomial p-value at p = 1/2 (the
  exact McNemar test), computed with integer arithmetic (``math.comb``), so it
  is exact up to the final rounding to float.
* ``binom_logpmf``: vectorized log-space binomial probabilities from a table of
  log-factorials, used for power calculations.
"""

from __future__ import annotations

import math

import numpy as np

__all__ = [
    "regularized_gamma_q",
    "chi2_sf",
    "binom_two_sided_half",
    "log_factorials",
    "binom_logpmf",
]

_EPS = 1e-15
_TINY = 1e-300
_MAX_ITER = 10_000


def _gamma_p_series(a: float, x: float) -> float:
    """Regularized lower incomplete gamma P(a, x) by its power series (x < a + 1)."""
    term = 1.0 / a
    total = term
    denom = a
    for _ in range(_MAX_ITER):
        denom += 1.0
        term *= x / denom
        total += term
        if abs(term) < abs(total) * _EPS:
            break
    return total * math.exp(-x + a * math.log(x) - math.lgamma(a))


def _gamma_q_continued_fraction(a: float, x: float) -> float:
    """Regularized upper incomplete gamma Q(a, x) by modified Lentz (x >= a + 1)."""
    b = x + 1.0 - a
    c = 1.0 / _TINY
    d = 1.0 / b
    h = d
    for i in range(1, _MAX_ITER):
        an = -i * (i - a)
        b += 2.0
        d = an * d + b
        if abs(d) < _TINY:
            d = _TINY
        c = b + an / c
        if abs(c) < _TINY:
            c = _TINY
        d = 1.0 / d
        delta = d * c
        h *= delta
        if abs(delta - 1.0) < _EPS:
            break
    return math.exp(-x + a * math.log(x) - math.lgamma(a)) * h


def regularized_gamma_q(a: float, x: float) -> float:
    """Q(a, x) = Γ(a, x) / Γ(a) for ``a > 0``, ``x >= 0``; a probability in [0, 1]."""
    if not (a > 0 and math.isfinite(a)):
        raise ValueError(f"a must be a finite number > 0, got {a!r}")
    if math.isnan(x) or x < 0:
        raise ValueError(f"x must be >= 0, got {x!r}")
    if x == 0:
        return 1.0
    if math.isinf(x):
        return 0.0
    # The series converges fast below a + 1, the continued fraction above.
    q = 1.0 - _gamma_p_series(a, x) if x < a + 1.0 else _gamma_q_continued_fraction(a, x)
    return min(1.0, max(0.0, q))


def chi2_sf(x: float, df: int | float) -> float:
    """P(X >= x) for X chi-square with ``df > 0`` degrees of freedom."""
    if not df > 0:
        raise ValueError(f"df must be > 0, got {df!r}")
    if x <= 0:
        return 1.0
    return regularized_gamma_q(df / 2.0, x / 2.0)


def binom_two_sided_half(k: int, n: int) -> float:
    """Exact two-sided p-value of ``k`` successes in ``n`` trials under p = 1/2.

    Equals ``min(1, 2 * P(X <= min(k, n - k)))`` (the distribution is
    symmetric), and 1 when ``n == 0``. Matches ``scipy.stats.binomtest(k, n).pvalue``.
    """
    if n < 0 or not 0 <= k <= n:
        raise ValueError(f"need 0 <= k <= n, got k={k}, n={n}")
    low = min(k, n - k)
    if n == 0 or 2 * low == n:
        return 1.0
    tail = sum(math.comb(n, i) for i in range(low + 1))
    # Big-int true division is correctly rounded, even when 2**n overflows a float.
    return min(1.0, (2 * tail) / (1 << n))


def log_factorials(n_max: int) -> np.ndarray:
    """``log(k!)`` for k = 0..n_max as a float array of length ``n_max + 1``."""
    out = np.zeros(n_max + 1)
    if n_max > 0:
        out[1:] = np.cumsum(np.log(np.arange(1, n_max + 1, dtype=float)))
    return out


def binom_logpmf(k: np.ndarray, n: int, p: float, log_fact: np.ndarray) -> np.ndarray:
    """log P(X = k) for X ~ Binomial(n, p), vectorized over ``k`` (ints in 0..n).

    ``log_fact`` must come from ``log_factorials(m)`` with ``m >= n``.
    """
    k = np.asarray(k, dtype=np.int64)
    log_coef: np.ndarray = log_fact[n] - log_fact[k] - log_fact[n - k]
    with np.errstate(divide="ignore", invalid="ignore"):
        if p <= 0.0:
            return np.where(k == 0, 0.0, -np.inf)
        if p >= 1.0:
            return np.where(k == n, 0.0, -np.inf)
        return log_coef + k * math.log(p) + (n - k) * math.log1p(-p)
