"""The placebo profile: the run's profile turned so that it aims at the wrong residues.

The placebo arrangement is phase-aware assembly with every per-residue figure of
the profile rotated by ``shift`` residues: the derived profile's residue ``r``
gets the real profile's residue ``r + shift`` (mod the period). The planner then
pads, reorders and repeats exactly as phase-aware does, but lands key tokens where
the derived profile is best, which is where the real one is worst. Phase-aware
beating the placebo is therefore evidence for the residues, not for the padding,
the order or the length.

The shift is half the period when the period is even (a period-8 profile's best
residues become its ``+4`` ones). For an odd period no rotation is exactly half,
so the shift is the one whose rotated reliabilities correlate least with the
real ones (ties: the larger shift, nearer half). A flat profile has nothing to
anti-correlate and takes ``period // 2``; a period-1 profile has no other residue
and its placebo is the profile itself.

Only the key residues move: the total-length effect, the local window and the
tokenizer are the real profile's, so the placebo differs from phase-aware in where
it puts the keys alone. The caller's profile is never changed: a new one is built.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence
from typing import TypeVar

import numpy as np

from phaseaware.profiles.model import Profile

__all__ = ["placebo_profile", "placebo_shift"]


T = TypeVar("T")


def _rotate(values: tuple[T, ...], shift: int) -> tuple[T, ...]:
    period = len(values)
    return tuple(values[(r + shift) % period] for r in range(period))


def placebo_shift(reliabilities: Sequence[float]) -> int:
    """Residues to rotate the profile by (see the module docstring); 0 for period 1."""
    period = len(reliabilities)
    if period < 2:
        return 0
    if period % 2 == 0:
        return period // 2
    values = np.asarray(reliabilities, dtype=float)
    centred = values - values.mean()
    if not np.any(np.abs(centred) > 1e-12):
        return period // 2
    # circular autocorrelation at each shift (symmetric: s and period - s are equal)
    scores = {s: float(np.dot(centred, np.roll(centred, -s))) for s in range(1, period // 2 + 1)}
    least = min(scores.values())
    return max(s for s, score in scores.items() if score <= least + 1e-12)


def placebo_profile(profile: Profile) -> Profile:
    """A new profile with ``profile``'s per-residue figures rotated by
    :func:`placebo_shift`; ``extra["x-placebo-shift"]`` records the shift (a schema
    extension, so the derived profile stays a valid one)."""
    shift = placebo_shift(profile.planner_reliabilities())
    return dataclasses.replace(
        profile,
        residue_accuracy=_rotate(profile.residue_accuracy, shift),
        n=_rotate(profile.n, shift),
        ci_low=_rotate(profile.ci_low, shift),
        ci_high=_rotate(profile.ci_high, shift),
        reliability=None if profile.reliability is None else _rotate(profile.reliability, shift),
        extra={**profile.extra, "x-placebo-shift": shift},
    )
