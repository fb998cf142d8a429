"""The residue values the pad search scores far keys by agree with its key reliability.

``choose_pads`` scores a chunk whose keys are all outside the local window by
``residue_values[t % period]``; that must be ``reliability(t, d)`` there, also with
``AssemblyOptions.offsets`` (the mean over the set). Before, the offsets case scored far
keys at the primary offset alone.
"""

from __future__ import annotations

import pytest

from phaseaware.assembly.inputs.options import AssemblyOptions
from phaseaware.assembly.plan.reliability import mean_key_reliability, offset_mean
from phaseaware.profiles.registry import get_profile


@pytest.mark.parametrize(
    "options",
    [
        AssemblyOptions(),
        AssemblyOptions(position_offset=1),
        AssemblyOptions(offsets=(0, 1, 3)),
        AssemblyOptions(offsets=(2, 5)),
    ],
)
@pytest.mark.parametrize("name", ["deepseek-v4-flash-base", "deepseek-v4-flash-0731"])
def test_residue_values_equal_key_reliability_outside_the_window(
    name: str, options: AssemblyOptions
) -> None:
    profile = get_profile(name)
    assert profile.local_window is not None
    far = profile.local_window + 1
    # what the planner's pad search reads (``planner._pad_search``): both averaged over the
    # offsets, or at the one offset
    offsets = options.offsets or (options.position_offset,)
    by_model = [profile.residue_reliability(r) for r in range(profile.period)]
    values = offset_mean(by_model, offsets=offsets)
    reliability = mean_key_reliability(profile, offsets=offsets)
    for t in range(3 * profile.period):
        assert values[t % profile.period] == reliability(t, far)
