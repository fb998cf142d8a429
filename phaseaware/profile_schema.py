"""Moved to :mod:`phaseaware.profiles.schema`; this shim keeps the old import path working."""

from phaseaware.profiles.schema import (
    KEY_ORDER,
    OPTIONAL_KEYS,
    REQUIRED_KEYS,
    SUPPORTED_SCHEMAS,
    validate_profile_dict,
)

__all__ = [
    "KEY_ORDER",
    "OPTIONAL_KEYS",
    "REQUIRED_KEYS",
    "SUPPORTED_SCHEMAS",
    "validate_profile_dict",
]
