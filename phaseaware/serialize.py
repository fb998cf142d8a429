"""The one way to turn frozen dataclasses into plain JSON-ready values.

``to_plain(value)`` maps a dataclass instance to a dict of its fields in declaration
order (recursively), tuples and lists to lists, mappings to dicts (keys as given,
in their order); every other value is returned unchanged. Results, profiles and
probe settings all serialize through it, so their JSON has one shape: lists, not
tuples, and a stable key order.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Collection, Mapping
from typing import Any

__all__ = ["to_plain", "dataclass_to_dict"]


def to_plain(value: object) -> Any:
    """``value`` with dataclasses as dicts and sequences as lists, recursively."""
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        return {f.name: to_plain(getattr(value, f.name)) for f in dataclasses.fields(value)}
    if isinstance(value, tuple | list):
        return [to_plain(v) for v in value]
    if isinstance(value, Mapping):
        return {k: to_plain(v) for k, v in value.items()}
    return value


def dataclass_to_dict(instance: object, *, omit_if_none: Collection[str] = ()) -> dict[str, Any]:
    """``to_plain(instance)`` of a dataclass instance, without the ``omit_if_none`` fields
    whose value is ``None`` (optional keys a document writes only when set)."""
    if not dataclasses.is_dataclass(instance) or isinstance(instance, type):
        raise TypeError(f"expected a dataclass instance, got {type(instance).__name__}")
    plain: dict[str, Any] = to_plain(instance)
    return {k: v for k, v in plain.items() if not (k in omit_if_none and v is None)}
