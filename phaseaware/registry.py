"""Moved to :mod:`phaseaware.profiles.registry`; this shim keeps the old import path working."""

from phaseaware.profiles.registry import (
    ENV_HOME,
    ENV_PROFILE_PATH,
    ProfileEntry,
    builtin_profile_dir,
    check_period,
    check_tokenizer,
    find_profile,
    get_profile,
    list_profiles,
    normalize_model_name,
    profile_filename,
    save_user_profile,
    search_path,
    user_profile_dir,
)

__all__ = [
    "ENV_HOME",
    "ENV_PROFILE_PATH",
    "ProfileEntry",
    "builtin_profile_dir",
    "check_period",
    "check_tokenizer",
    "find_profile",
    "get_profile",
    "list_profiles",
    "normalize_model_name",
    "profile_filename",
    "save_user_profile",
    "search_path",
    "user_profile_dir",
]
