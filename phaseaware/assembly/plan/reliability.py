"""Reliability of a key token by position: the profile's model, or the heuristic without one.

``key_reliability`` and ``position_reliability(ies)`` are the only planning functions
that take a ``Profile``. ``offset_mean`` is the one average over a set of server
offsets (``AssemblyOptions.offsets``), with one index convention: the returned list is
indexed by the PROMPT residue ``r`` (prompt token index mod period), and entry ``r`` is
the mean of ``reliability[(r + d) % period]`` over the offsets ``d`` in the given
order, ``reliability`` being indexed by MODEL residue (position the model sees, mod
period). ``weighted_accuracy`` is the relevance-weighted mean that the plan, the naive
baseline and the report all score with.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import TYPE_CHECKING

if TYPE_CHECKING:  # pragma: no cover
    from phaseaware.profiles.model import Profile

__all__ = [
    "default_position_reliability",
    "key_reliability",
    "mean_key_reliability",
    "offset_mean",
    "position_reliabilities",
    "position_reliability",
    "weighted_accuracy",
]


def offset_mean(reliability: Sequence[float], *, offsets: Sequence[int]) -> list[float]:
    """By prompt residue ``r``: the mean over ``offsets`` of ``reliability[(r + d) % period]``
    (``reliability`` by model residue; summed in the order of ``offsets``)."""
    period = len(reliability)
    return [
        sum(reliability[(r + d) % period] for d in offsets) / len(offsets) for r in range(period)
    ]


def mean_key_reliability(
    profile: Profile | None, *, offsets: Sequence[int]
) -> Callable[[int, int], float]:
    """``key_reliability`` averaged over ``offsets`` (summed in their order); for one offset,
    that offset's lookup itself."""
    lookups = [key_reliability(profile, offset=d) for d in offsets]
    if len(lookups) == 1:
        return lookups[0]
    return lambda t, distance: sum(f(t, distance) for f in lookups) / len(lookups)


def weighted_accuracy(
    *,
    weights: Sequence[float],
    keyed: Sequence[bool],
    accuracy: Mapping[int, float | None],
) -> float | None:
    """Relevance-weighted mean accuracy over the ``keyed`` chunks (input index -> accuracy;
    a chunk without an entry, or with None, counts 0); None when no keyed chunk weighs."""
    total = weight_sum = 0.0
    for i, has_keys in enumerate(keyed):
        if not has_keys:
            continue
        weight_sum += weights[i]
        total += weights[i] * (accuracy.get(i) or 0.0)
    return total / weight_sum if weight_sum > 0 else None


def default_position_reliability(position: int, *, prompt_length: int) -> float:
    """Heuristic U-shaped curve (lost in the middle) used when there is no profile.

    0.5 in the middle of the prompt, 1.0 at both ends; not a measurement.
    """
    if prompt_length <= 1:
        return 1.0
    x = position / (prompt_length - 1)
    return 0.5 + 0.5 * (2 * x - 1) ** 2


def key_reliability(profile: Profile | None, *, offset: int = 0) -> Callable[[int, int], float]:
    """Reliability of a key token at ``(position, distance to the prompt's end)``.

    ``position`` indexes the prompt's tokens; the model sees it at ``position +
    offset`` (tokens its server adds first, e.g. a BOS). The profile's own model
    (``Profile.key_reliability_lookup``); without a profile, the lost-in-the-middle
    heuristic.
    """
    if profile is None:
        return lambda t, d: default_position_reliability(t, prompt_length=t + d)
    return profile.key_reliability_lookup(offset=offset)


def position_reliabilities(
    profile: Profile | None, positions: Sequence[int], *, length: int, offset: int = 0
) -> list[float]:
    """``position_reliability(profile, length=length, offset=offset)`` at each position
    (the profile's vectorised form; the heuristic per position without a profile)."""
    if profile is not None:
        return profile.position_reliabilities(positions, length, offset=offset)
    at = position_reliability(None, length=length, offset=offset)
    return [at(t) for t in positions]


def position_reliability(
    profile: Profile | None, *, length: int, offset: int = 0
) -> Callable[[int], float]:
    """Expected accuracy of a key at token t of a ``length``-token prompt.

    The profile's own model (``Profile.position_reliabilities`` at one position: key
    reliability times the length factor); the lost-in-the-middle heuristic without a
    profile. For many positions call ``position_reliabilities``.
    """
    if profile is not None:
        return lambda t: profile.position_reliabilities((t,), length, offset=offset)[0]
    last = length - 1

    def at(t: int) -> float:
        t = min(t, last)
        return default_position_reliability(t, prompt_length=length)

    return at
