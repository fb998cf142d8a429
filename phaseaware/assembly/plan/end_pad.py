"""How far an end pad may reach: ``end_pad_reach`` (the prepared request's end pad table)."""

from __future__ import annotations

__all__ = ["end_pad_reach"]


def end_pad_reach(
    *,
    period: int,
    window: int | None,
    window_reliability: float,
    best_reliability: float,
    length_period: int | None,
    pad: bool,
    length_pad: bool,
) -> int:
    """Largest end pad (filler units) worth trying; 0: no end pad.

    The end pad moves the prompt length's residue (``length_pad`` with a
    length effect of period ``length_period``: up to two of its periods) and
    pushes keys out of the raw local window (``pad``, when the window's
    reliability is below the best residue's: up to the window plus a period).
    """
    reach = 0
    if length_pad and length_period is not None:
        reach = 2 * length_period
    if pad and window is not None and window_reliability < best_reliability:
        reach = max(reach, window + period)
    return reach
