"""argparse ``type=`` functions for every numeric flag: finite, range-checked, or exit 2.

A flag that parses but means nothing (``--fail-under nan``, ``--timeout inf``,
``--context-tokens -1``) would otherwise switch a guard off or send a run on
with nonsense; each factory returns a parser that refuses it with a message
naming the accepted range. The bounds are the command's own (see each
``add_argument``); the shared ones are constants here.
"""

from __future__ import annotations

import argparse
import math
from collections.abc import Callable

from phaseaware.limits import MAX_PERIOD

__all__ = [
    "fraction",
    "integer",
    "number",
    "period_or_auto",
    "seconds",
]


def period_or_auto(text: str) -> int | None:
    """``--period``: an integer in ``[1, MAX_PERIOD]``, or ``auto`` (None: detect it)."""
    if text == "auto":
        return None
    try:
        return integer(1, MAX_PERIOD)(text)
    except argparse.ArgumentTypeError:
        raise argparse.ArgumentTypeError(
            f"expected an integer in [1, {MAX_PERIOD}] or 'auto', got {text[:40]!r}"
        ) from None


def integer(low: int, high: int) -> Callable[[str], int]:
    """A parser for a base-10 integer in ``[low, high]``."""

    def parse(text: str) -> int:
        try:
            value = int(text.strip(), 10)
        except ValueError:
            raise argparse.ArgumentTypeError(
                f"expected an integer in [{low}, {high}], got {_shown(text)}"
            ) from None
        if not low <= value <= high:
            raise argparse.ArgumentTypeError(
                f"expected an integer in [{low}, {high}], got {_shown(text)}"
            )
        return value

    return parse


def number(low: float, high: float, *, low_open: bool = False) -> Callable[[str], float]:
    """A parser for a finite number in ``[low, high]`` (``(low, high]`` with ``low_open``)."""
    shown = f"{'(' if low_open else '['}{low:g}, {high:g}]"

    def parse(text: str) -> float:
        try:
            value = float(text)
        except ValueError:
            raise argparse.ArgumentTypeError(
                f"expected a number in {shown}, got {_shown(text)}"
            ) from None
        if not math.isfinite(value):
            raise argparse.ArgumentTypeError(
                f"expected a finite number in {shown}, got {_shown(text)}"
            )
        if value < low or value > high or (low_open and value == low):
            raise argparse.ArgumentTypeError(f"expected a number in {shown}, got {_shown(text)}")
        return value

    return parse


def fraction(*, low_open: bool = False) -> Callable[[str], float]:
    """A parser for a finite fraction in ``[0, 1]`` (``(0, 1]`` with ``low_open``)."""
    return number(0.0, 1.0, low_open=low_open)


def seconds(high: float = 86_400.0) -> Callable[[str], float]:
    """A parser for a finite, positive duration in seconds (at most ``high``)."""
    return number(0.0, high, low_open=True)


def _shown(text: str) -> str:
    return repr(text if len(text) <= 40 else text[:37] + "...")
