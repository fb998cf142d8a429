"""Binomial confidence intervals for profiles: the Wilson score interval.

Pure functions, no numpy/scipy: the numbers go into profile files and must be
reproducible bit-for-bit on any machine.
"""

from __future__ import annotations

import math

__all__ = ["Z_95", "wilson_interval"]

#: Two-sided 95% standard-normal quantile, Φ⁻¹(0.975).
Z_95 = 1.959963984540054


def wilson_interval(successes: int, n: int, *, z: float = Z_95) -> tuple[float, float]:
    """Wilson score interval ``(low, high)`` for a binomial proportion, as fractions 0..1.

    ``successes`` correct answers out of ``n`` trials; ``z`` is the normal
    quantile (default: two-sided 95%).

    Edge cases (chosen, and relied on by profiles):

    * ``n == 0`` returns ``(0.0, 1.0)``: no trials, no information. Profiles store
      ``null`` for unknown counts instead of calling this.
    * ``successes == 0`` gives ``low == 0.0`` exactly; ``successes == n`` gives
      ``high == 1.0`` exactly.
    * The interval always contains ``successes / n`` and lies in ``[0, 1]``.

    Raises ``ValueError`` for negative ``n``, ``successes`` outside ``0..n``,
    non-integer counts, or a non-finite/negative ``z``.
    """
    for name, value in (("successes", successes), ("n", n)):
        if isinstance(value, bool) or not isinstance(value, int):
            raise ValueError(f"{name} must be an int, got {value!r}")
    if n < 0:
        raise ValueError(f"n must be >= 0, got {n}")
    if not 0 <= successes <= n:
        raise ValueError(f"successes must be in 0..n (n={n}), got {successes}")
    if not (math.isfinite(z) and z >= 0):
        raise ValueError(f"z must be a finite number >= 0, got {z!r}")
    if n == 0:
        return (0.0, 1.0)
    p = successes / n
    z2 = z * z
    denom = 1.0 + z2 / n
    center = (p + z2 / (2 * n)) / denom
    half = (z / denom) * math.sqrt(p * (1.0 - p) / n + z2 / (4.0 * n * n))
    low = 0.0 if successes == 0 else max(0.0, min(p, center - half))
    high = 1.0 if successes == n else min(1.0, max(p, center + half))
    return (low, high)
