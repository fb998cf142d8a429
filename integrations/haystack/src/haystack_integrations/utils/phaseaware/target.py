"""The kit's target arguments (:class:`phaseaware.integrate.TargetArgs`) as the plain values
a Haystack pipeline writes to YAML (``to_dict``) and reads back (``from_dict``)."""

from __future__ import annotations

import dataclasses
import os
from collections.abc import Mapping
from typing import Any

import phaseaware.integrate as kit
from phaseaware import AssemblyOptions
from phaseaware.errors import InputError

__all__ = ["TARGET_KEYS", "plain_target_args"]

#: The target arguments a phaseaware component stores, in the kit's order.
TARGET_KEYS = (
    "tokenizer",
    "chat_format",
    "profile",
    "budget_tokens",
    "options",
    "position_offset",
    "endpoint",
    "thinking",
    "settings",
    "state_settings",
)


def _plain(name: str, value: Any) -> Any:
    if value is None or isinstance(value, str | int | float | bool):
        return value
    if isinstance(value, os.PathLike):
        return os.fspath(value)
    if name == "tokenizer" and isinstance(value, kit.Tokenizer):
        return value.spec  # the registry spec loads the same tokenizer
    if isinstance(value, AssemblyOptions | kit.ChatSettings):
        return {k: list(v) if isinstance(v, tuple) else v for k, v in _fields(value).items()}
    if isinstance(value, Mapping):
        return {str(k): _plain(name, v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [_plain(name, v) for v in value]
    raise InputError(
        f"{name}={type(value).__name__} cannot be written to a pipeline file; pass it as a "
        "name, a file path or a dict of its fields so that the pipeline serialises"
    )


def _fields(value: Any) -> dict[str, Any]:
    return {f.name: getattr(value, f.name) for f in dataclasses.fields(value)}


def plain_target_args(args: Mapping[str, Any]) -> dict[str, Any]:
    """``args`` (the kit's target keywords) as YAML-safe values: a tokenizer object as its
    spec, options and settings as dicts of their fields; ``InputError`` naming an
    argument that has no plain form (a ``Profile`` or ``ChatFormat`` object)."""
    return {k: _plain(k, args[k]) for k in TARGET_KEYS if k in args}
