"""The one reliability model: what assembly plans and reports with is the profile's."""

from __future__ import annotations

import dataclasses

import pytest

from phaseaware.assembly.plan import planner
from phaseaware.profiles.model import LocalWindowEffect
from phaseaware.profiles.registry import get_profile
from tests.support import reliability_reference as reference


def weak_window(profile, accuracy: float):
    """``profile`` with a 48-token raw window measured at ``accuracy``."""
    return dataclasses.replace(
        profile,
        local_window=48,
        local_window_accuracy=LocalWindowEffect(
            accuracy=accuracy, n=50, ci_low=max(0.0, accuracy - 0.1),
            ci_high=min(1.0, accuracy + 0.1), min_distance=20, max_distance=48, source="test",
        ),
    )  # fmt: skip


@pytest.mark.parametrize(
    "name", ["deepseek-v4-flash-base", "deepseek-v4-flash-0731", "weak-window"]
)
def test_one_reliability_model_matches_profile(name) -> None:
    # assembly plans with key_reliability and reports position_reliability: both are
    # the profile's position_reliability (without / with the length factor)
    if name == "weak-window":
        profile = weak_window(get_profile("deepseek-v4-flash-base"), accuracy=0.6)
    else:
        profile = get_profile(name)
    for length, offset in ((50, 0), (131, 0), (1003, 0), (131, 1), (50, 3)):
        rel = planner.position_reliability(profile, length=length, offset=offset)
        key = planner.key_reliability(profile, offset=offset)
        factor = profile.length_factor(length + offset)
        for t in range(length):
            want = reference.position_reliability(
                profile, t + offset, prompt_length=length + offset
            )
            assert rel(t) == pytest.approx(want)
            assert key(t, length - t) * factor == pytest.approx(want)


def test_no_profile_is_the_lost_in_the_middle_heuristic() -> None:
    rel = planner.position_reliability(None, length=101)
    for t in (0, 50, 100, 500):
        want = planner.default_position_reliability(min(t, 100), prompt_length=101)
        assert rel(t) == want
