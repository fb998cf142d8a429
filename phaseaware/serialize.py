"""The one way to turn phaseaware's frozen dataclasses into plain JSON-ready values.

``to_plain`` maps a dataclass instance to a dict of its fields in declaration
order, tuples and lists to lists, and dicts to dicts, recursively; anything
else is returned as is. ``json.dumps(to_plain(x))`` is then stable: same value,
same bytes.
"""

from __future__ import annotations

import dataclasses
from typing import Any

__all__ = ["to_plain"]


def to_plain(value: Any) -> Any:
    """``value`` with dataclasses as dicts (field order), tuples as lists, recursively."""
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        return {f.name: to_plain(getattr(value, f.name)) for f in dataclasses.fields(value)}
    if isinstance(value, tuple | list):
        return [to_plain(v) for v in value]
    if isinstance(value, dict):
        return {k: to_plain(v) for k, v in value.items()}
    return value
