"""Dotted field paths into a log record: ``doc.outputs.0`` reads ``record["doc"]["outputs"][0]``.

Paths are how ``--needle-field`` and ``--correct-field`` name a field in any
format; a missing step returns :data:`MISSING` (the sample is then skipped
with its reason, never guessed).
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from typing import Any, Final

__all__ = ["MISSING", "get_path", "needle_values", "correct_value"]


class _Missing:
    def __repr__(self) -> str:
        return "MISSING"


MISSING: Final = _Missing()


def get_path(record: Any, path: str) -> Any:
    """The value at dotted ``path`` in ``record`` (mappings by key, lists by integer index),
    or :data:`MISSING`."""
    value = record
    for step in path.split("."):
        if isinstance(value, Mapping):
            if step not in value:
                return MISSING
            value = value[step]
        elif isinstance(value, Sequence) and not isinstance(value, str | bytes):
            try:
                value = value[int(step)]
            except (ValueError, IndexError):
                return MISSING
        else:
            return MISSING
    return value


def needle_values(value: Any) -> tuple[str, ...] | None:
    """A needle field's value as strings: one string, or a list of them (several needles);
    ``None`` for anything else (missing, empty, not text: a JSON number, ``NaN`` included, is
    refused rather than matched as its decimal text, e.g. ``"nan"``)."""
    if isinstance(value, str):
        return (value,) if value else None
    if isinstance(value, Sequence) and not isinstance(value, bytes) and value:
        items = tuple(needle_values(v) for v in value)
        if any(v is None or len(v) != 1 for v in items):
            return None
        return tuple(v[0] for v in items if v is not None)
    return None


def correct_value(value: Any, *, pass_at: float) -> bool | None:
    """A correctness field as a verdict: booleans as they are, numbers correct at ``>= pass_at``
    (``1.0`` for 0..1 metrics such as lm-eval's ``exact_match``), ``"true"``/``"false"``;
    ``None`` when the value is missing or not one of those."""
    if isinstance(value, bool):
        return value
    if isinstance(value, int | float):
        return bool(value >= pass_at) if value == value else None  # NaN: no verdict
    if isinstance(value, str) and value.strip().lower() in ("true", "false"):
        return value.strip().lower() == "true"
    if isinstance(value, Sequence) and not isinstance(value, str | bytes) and len(value) == 1:
        return correct_value(value[0], pass_at=pass_at)
    return None


def as_messages(value: Any) -> tuple[dict[str, Any], ...] | None:
    """A chat prompt (a list of ``{"role", "content"}`` objects, or that list as a JSON
    string, as lm-eval logs it for chat APIs), or ``None`` when ``value`` is not one."""
    if isinstance(value, str):
        text = value.lstrip()
        if not text.startswith("[{"):
            return None
        try:
            value = json.loads(text)
        except ValueError:
            return None
    if (
        isinstance(value, Sequence)
        and not isinstance(value, str | bytes)
        and value
        and all(isinstance(m, Mapping) and "role" in m for m in value)
    ):
        return tuple(dict(m) for m in value)
    return None
