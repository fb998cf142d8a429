"""Empirical-Bayes shrinkage of per-residue accuracies (beta-binomial).

The planner uses the shrunken values as ``Profile.reliability`` so that a
residue measured with few probes cannot look like a weak spot by chance.

Model: residue ``r``'s true accuracy is drawn from Beta(m·M, (1-m)·M) (mean
``m``, strength ``M`` pseudo-trials); ``successes[r] ~ Binomial(n[r], p_r)``.
``m`` and ``M`` are estimated by the method of moments across residues, and
each residue's posterior mean ``(s + m·M) / (n + M)`` is returned.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np

from phaseaware.errors import InputError

__all__ = ["BetaPrior", "beta_prior", "shrink_accuracies"]

#: Bounds on the prior strength M (pseudo-trials): at least one pseudo-trial of
#: pooling; at most "complete pooling" when the data show no real spread.
MIN_PRIOR_STRENGTH = 1.0
MAX_PRIOR_STRENGTH = 1e6


@dataclass(frozen=True)
class BetaPrior:
    """Beta prior over residue accuracies: ``mean`` (fraction), ``strength`` (pseudo-trials).

    ``between_variance`` is the moment estimate of the variance of the true
    accuracies across residues (fraction², clamped at 0).
    """

    mean: float
    strength: float
    between_variance: float


def _counts(successes: Any, n: Any) -> tuple[np.ndarray, np.ndarray]:
    s = np.array(successes, dtype=float, copy=True).reshape(-1)
    k = np.array(n, dtype=float, copy=True).reshape(-1)
    if s.shape != k.shape:
        raise InputError(
            f"successes and n must have one entry per residue, got {s.size} and {k.size}"
        )
    if not (np.isfinite(s).all() and np.isfinite(k).all()) or (k < 0).any():
        raise InputError("n must be finite counts >= 0 and successes finite")
    if ((s < 0) | (s > k)).any():
        raise InputError("each successes[r] must be in 0..n[r]")
    return s, k


def beta_prior(successes: Any, n: Any) -> BetaPrior:
    """Method-of-moments beta prior across residues (only residues with ``n > 0`` count).

    ``between_variance = var(p̂) - m(1-m)·mean(1/n)`` (observed spread minus the
    binomial noise expected at these counts), and ``M = m(1-m)/between_variance - 1``,
    clamped to ``[MIN_PRIOR_STRENGTH, MAX_PRIOR_STRENGTH]``. With fewer than two
    measured residues, or no excess spread, the prior is as strong as allowed.
    """
    s, k = _counts(successes, n)
    has = k > 0
    if not has.any():
        raise InputError("no residue has any trial; run the calibration sweep first")
    p = s[has] / k[has]
    mean = float(s[has].sum() / k[has].sum())
    spread = mean * (1.0 - mean)
    if p.size < 2 or spread <= 0.0:
        return BetaPrior(mean=mean, strength=MAX_PRIOR_STRENGTH, between_variance=0.0)
    observed = float(np.var(p, ddof=1))
    noise = spread * float(np.mean(1.0 / k[has]))
    between = max(0.0, observed - noise)
    # No excess spread over binomial noise: pool completely (clamped below).
    strength = MAX_PRIOR_STRENGTH if between <= 0.0 else spread / min(between, spread) - 1.0
    strength = float(np.clip(strength, MIN_PRIOR_STRENGTH, MAX_PRIOR_STRENGTH))
    return BetaPrior(mean=mean, strength=strength, between_variance=between)


def shrink_accuracies(successes: Any, n: Any) -> np.ndarray:
    """Posterior-mean accuracy per residue (fractions 0..1), shrunk toward the pooled mean.

    Residues with ``n == 0`` get the prior mean. Few trials or a flat truth →
    strong shrinkage (values nearly equal); a large real spread measured with
    many trials is kept almost as measured. Returns a new array.
    """
    s, k = _counts(successes, n)
    prior = beta_prior(s, k)
    m, strength = prior.mean, prior.strength
    return (s + m * strength) / (k + strength)
