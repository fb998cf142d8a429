"""``Profile.position_reliabilities`` equals the scalar reference at every position."""

from __future__ import annotations

import dataclasses

from hypothesis import given, settings
from hypothesis import strategies as st

from phaseaware.assembly.plan import planner
from phaseaware.profiles.registry import get_profile, list_profiles
from tests.support import reliability_reference as reference

NAMES = sorted(e.name for e in list_profiles())


@settings(max_examples=300, deadline=None)
@given(
    name=st.sampled_from(NAMES),
    length=st.integers(1, 5_000),
    offset=st.integers(0, 9),
    positions=st.lists(st.integers(0, 6_000), max_size=40),
    window=st.one_of(st.none(), st.integers(0, 300), st.just("profile")),
)
def test_vectorised_reliabilities_equal_the_lookup(name, length, offset, positions, window) -> None:
    profile = get_profile(name)
    if window != "profile":
        profile = dataclasses.replace(profile, local_window=window)
    last = length - 1
    assert profile.position_reliabilities(positions, length, offset=offset) == [
        reference.position_reliability(
            profile, min(t, last) + offset, prompt_length=length + offset
        )
        for t in positions
    ]
    assert planner.position_reliabilities(profile, positions, length=length, offset=offset) == [
        planner.position_reliability(profile, length=length, offset=offset)(t) for t in positions
    ]
    assert planner.position_reliabilities(None, positions, length=length) == [
        planner.position_reliability(None, length=length)(t) for t in positions
    ]
