"""Profile: THE reliability model, and its O(1) lookups equal to the per-position methods."""

from __future__ import annotations

import dataclasses

import pytest

from phaseaware.profiles.model import LocalWindowEffect, Profile
from phaseaware.profiles.registry import get_profile
from tests.support import reliability_reference as reference


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
            want = reference.key_reliability(profile, t + offset, distance_to_end=length - t)
            assert lookup(t, length - t) == want  # exactly: planners compare sums of these


@pytest.mark.parametrize("profile", _profiles(), ids=lambda p: p.model)
def test_position_reliabilities_equal_position_reliability(profile: Profile) -> None:
    for length, offset in CASES:
        got = profile.position_reliabilities([*range(length), length + 5], length, offset=offset)
        for t in range(length):
            want = reference.position_reliability(
                profile, t + offset, prompt_length=length + offset
            )
            assert got[t] == want  # exactly
        assert got[length] == got[length - 1]  # past the end counts as the last token


def test_window_and_residues() -> None:
    profile = _weak_window(get_profile("deepseek-v4-flash-base"))
    assert profile.key_reliability_lookup()(3, 48) == 0.6  # inside: measured window
    assert profile.key_reliability_lookup()(3, 49) == profile.residue_accuracy[3]
    published = get_profile("deepseek-v4-flash-base")
    assert published.window_reliability() == published.best_reliability()  # not measured
    assert published.planner_reliabilities() == published.residue_accuracy


def test_position_outside_prompt_is_an_error_in_the_reference() -> None:
    with pytest.raises(ValueError, match="outside prompt"):
        reference.position_reliability(get_profile("deepseek-v4-flash-base"), 10, prompt_length=10)
