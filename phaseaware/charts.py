"""Plain-text horizontal bar charts for terminals (no colour, no dependencies).

Used by ``phaseaware profile show`` and calibration summaries to draw accuracy
by residue. Pure: returns a string, prints nothing.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

__all__ = ["bar_chart"]

_EIGHTHS = " ▏▎▍▌▋▊▉█"
# With interval markers, each cell is shaded by where its midpoint falls.
_BELOW_LOW, _LOW_TO_VALUE, _VALUE_TO_HIGH = "█", "▓", "░"
LEGEND = "█ up to CI low   ▓ CI low to value   ░ value to CI high"


def _check_values(name: str, values: Sequence[float | None] | None, count: int) -> None:
    if values is None:
        return
    if len(values) != count:
        raise ValueError(f"{name} has {len(values)} entries but there are {count} labels")
    for v in values:
        if v is not None and not math.isfinite(v):
            raise ValueError(f"{name} contains a non-finite value {v!r}")


def _solid_bar(fraction: float, width: int) -> str:
    """Bar of ``fraction`` (0..1) of ``width`` cells, to 1/8 of a cell."""
    eighths = round(max(0.0, min(1.0, fraction)) * width * 8)
    full, part = divmod(eighths, 8)
    bar = "█" * full + (_EIGHTHS[part] if part else "")
    return bar.ljust(width)


def _interval_bar(value: float, low: float | None, high: float | None, width: int) -> str:
    low = value if low is None else min(low, value)
    high = value if high is None else max(high, value)
    cells = []
    for i in range(width):
        mid = (i + 0.5) / width
        if mid < low:
            cells.append(_BELOW_LOW)
        elif mid < value:
            cells.append(_LOW_TO_VALUE)
        elif mid < high:
            cells.append(_VALUE_TO_HIGH)
        else:
            cells.append(" ")
    return "".join(cells)


def _fmt(value: float | None, unit: str) -> str:
    if value is None:
        return "n/a"
    if unit == "%":
        return f"{value * 100:.1f}%"
    return f"{value:.4g}{unit}"


def _scaled(value: float | None, scale: float) -> float | None:
    return None if value is None else value / scale


def bar_chart(
    labels: Sequence[str],
    values: Sequence[float | None],
    *,
    lows: Sequence[float | None] | None = None,
    highs: Sequence[float | None] | None = None,
    width: int = 40,
    unit: str = "%",
) -> str:
    """One line per label: ``label │bar│ value [low, high]``.

    With ``unit="%"`` values (and bounds) are fractions 0..1 drawn on a 0..1
    scale and printed as percentages. With any other unit the scale runs from
    0 to the largest value (or bound) and values are printed as given, followed
    by ``unit``; negative values are drawn as empty bars. ``None`` values print
    ``n/a``. When ``lows``/``highs`` are given, each bar is shaded to show the
    interval and a legend line is appended. Returns text without a trailing
    newline; raises ``ValueError`` on mismatched lengths, non-finite values or
    ``width < 1``.
    """
    count = len(labels)
    _check_values("values", values, count)
    _check_values("lows", lows, count)
    _check_values("highs", highs, count)
    if width < 1:
        raise ValueError(f"width must be >= 1 cell, got {width}")
    if count == 0:
        return ""
    lows_ = list(lows) if lows is not None else [None] * count
    highs_ = list(highs) if highs is not None else [None] * count
    scale = 1.0
    if unit != "%":
        known = [v for v in [*values, *lows_, *highs_] if v is not None]
        scale = max([abs(v) for v in known] + [0.0]) or 1.0
    label_width = max(len(str(label)) for label in labels)
    show_interval = lows is not None or highs is not None
    lines = []
    for label, value, low, high in zip(labels, values, lows_, highs_, strict=True):
        if value is None:
            bar = " " * width
        elif show_interval:
            bar = _interval_bar(value / scale, _scaled(low, scale), _scaled(high, scale), width)
        else:
            bar = _solid_bar(value / scale, width)
        text = f"{str(label).rjust(label_width)} │{bar}│ {_fmt(value, unit).rjust(7)}"
        if show_interval and (low is not None or high is not None):
            text += f"  [{_fmt(low, unit)}, {_fmt(high, unit)}]"
        lines.append(text.rstrip())
    if show_interval:
        lines.append(" " * (label_width + 2) + LEGEND)
    return "\n".join(lines)
