"""Profiles: a model's accuracy by residue (``model``), its v1 document (``schema``, ``io``)
and lookup by model name (``registry``); built-in published profiles in ``builtin/``."""

from __future__ import annotations

from phaseaware.profiles.io import dumps_profile, load_profile, loads_profile, save_profile
from phaseaware.profiles.model import (
    LengthResidueEffect,
    LocalWindowEffect,
    Profile,
    Provenance,
    TokenizerRef,
)
from phaseaware.profiles.registry import find_profile, get_profile, list_profiles

__all__ = [
    "LengthResidueEffect",
    "LocalWindowEffect",
    "Profile",
    "Provenance",
    "TokenizerRef",
    "dumps_profile",
    "find_profile",
    "get_profile",
    "list_profiles",
    "load_profile",
    "loads_profile",
    "save_profile",
]
