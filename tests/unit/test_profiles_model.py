"""Profile: THE reliability model, and its O(1) lookups equal to the per-position methods."""

from __future__ import annotations

import dataclasses

import pytest

from phaseaware.profiles.model import LocalWindowEffect, Profile
from phaseaware.profiles.registry import get_profile


def _weak_window(profile: Profile, accuracy: float = 0.6) -> Profile:
    """``profile`` with a 48-token raw window measured worse than its best residue."""
    effect = LocalWindowEffect(
        accuracy=accuracy, n=50, ci_low=accuracy - 0.1, ci_high=accuracy + 0.1,
        min_distance=20, max_distance=48, source="test",
    )  # fmt: skip
    return dataclasses.replace(profile, local_window=48, local_window_accuracy=effect)


def _profiles() -> list[Profile]:
    shrunk = dataclasses.replace(
        get_profile("deepseek-v4-flash-base"), reliability=(0.5, 0.6, 0.7, 0.2, 0.6, 0.7, 0.6, 0.3)
    )
    return [
        get_profile("deepseek-v4-flash-base"),
        get_profile("deepseek-v4-flash-0731"),  # a length-residue effect
        _weak_window(get_profile("deepseek-v4-flash-base")),
        shrunk,
    ]


CASES = [(50, 0), (131, 0), (1003, 0), (131, 1), (50, 3)]  # (prompt length, offset)


@pytest.mark.parametrize("profile", _profiles(), ids=lambda p: p.model)
def test_key_reliability_lookup_equals_key_reliability(profile: Profile) -> None:
    for length, offset in CASES:
        lookup = profile.key_reliability_lookup(offset=offset)
        for t in range(length):
            want = profile.key_reliability(t + offset, distance_to_end=length - t)
            assert lookup(t, length - t) == want  # exactly: planners compare sums of these


@pytest.mark.parametrize("profile", _profiles(), ids=lambda p: p.model)
def test_position_reliability_lookup_equals_position_reliability(profile: Profile) -> None:
    for length, offset in CASES:
        at = profile.position_reliability_lookup(length, offset=offset)
        for t in range(length):
            want = profile.position_reliability(t + offset, prompt_length=length + offset)
            assert at(t) == want
        assert at(length + 5) == at(length - 1)  # past the end counts as the last token


def test_window_and_residues() -> None:
    profile = _weak_window(get_profile("deepseek-v4-flash-base"))
    assert profile.key_reliability(3, distance_to_end=48) == 0.6  # inside: measured window
    assert profile.key_reliability(3, distance_to_end=49) == profile.residue_accuracy[3]
    published = get_profile("deepseek-v4-flash-base")
    assert published.window_reliability() == published.best_reliability()  # not measured
    assert published.planner_reliabilities() == published.residue_accuracy


def test_position_outside_prompt_is_an_error() -> None:
    with pytest.raises(ValueError, match="outside prompt"):
        get_profile("deepseek-v4-flash-base").position_reliability(10, prompt_length=10)
