"""Hosted API names resolve to the checkpoint they serve, and the lookup says so."""

from __future__ import annotations

import pytest

from phaseaware.errors import PhaseawareWarning
from phaseaware.profiles.aliases import HOSTED_ALIASES
from phaseaware.profiles.registry import find_profile, get_profile, list_profiles


def test_every_alias_names_a_builtin_checkpoint_and_a_date() -> None:
    names = {e.name for e in list_profiles()}
    for key, alias in HOSTED_ALIASES.items():
        assert alias.checkpoint in names, key
        assert len(alias.since) == 10 and alias.since[4] == "-"


def test_deepseek_v4_flash_resolves_to_v41_flash_with_a_warning() -> None:
    with pytest.warns(PhaseawareWarning, match="'deepseek-v4.1-flash'.*since 2026-09-10"):
        entry = find_profile("deepseek-ai/DeepSeek-V4-Flash")
    assert entry.name == "deepseek-v4.1-flash"
    with pytest.warns(PhaseawareWarning, match="resolved to checkpoint"):
        profile = get_profile("deepseek-v4-flash")
    assert profile.period == get_profile("deepseek-v4.1-flash").period


def test_checkpoint_names_resolve_without_a_warning(recwarn: pytest.WarningsRecorder) -> None:
    assert find_profile("deepseek-v4-flash-base").name == "deepseek-v4-flash-base"
    assert find_profile("deepseek-v4.1-flash").name == "deepseek-v4.1-flash"
    assert not [w for w in recwarn if issubclass(w.category, PhaseawareWarning)]
