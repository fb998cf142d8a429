"""Moved to :mod:`phaseaware.profiles.model`; this shim keeps the old import path working."""

from phaseaware.profiles.model import (
    SCHEMA,
    LengthResidueEffect,
    LocalWindowEffect,
    Profile,
    Provenance,
    TokenizerRef,
)

__all__ = [
    "SCHEMA",
    "LengthResidueEffect",
    "LocalWindowEffect",
    "Profile",
    "Provenance",
    "TokenizerRef",
]
