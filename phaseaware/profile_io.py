"""Moved to :mod:`phaseaware.profiles.io`; this shim keeps the old import path working."""

from phaseaware.profiles.io import (
    SUPPORTED_SCHEMAS,
    dumps_profile,
    load_profile,
    loads_profile,
    profile_from_dict,
    profile_to_dict,
    save_profile,
    validate_profile_dict,
    validate_profile_file,
)

__all__ = [
    "SUPPORTED_SCHEMAS",
    "dumps_profile",
    "load_profile",
    "loads_profile",
    "profile_from_dict",
    "profile_to_dict",
    "save_profile",
    "validate_profile_dict",
    "validate_profile_file",
]
