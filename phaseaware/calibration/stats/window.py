"""Window-sweep outcomes: accuracy by key-to-end distance and inside the raw local window.

A window-sweep probe (see :mod:`phaseaware.calibration.probes`) puts the target
record last, so its key token sits ``distance = prompt_tokens - key_position``
tokens from the end of the prompt. Keys with ``distance <= local_window`` are
read uncompressed; pooling those probes measures the window's own reliability
(:class:`~phaseaware.profile.LocalWindowEffect`) instead of assuming it equals
the best residue's. Probes of the other sweeps never enter these figures, and
window probes never enter the key or length statistics.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass

from phaseaware.calibration.log import ProbeRecord
from phaseaware.intervals import wilson_interval
from phaseaware.profiles.model import LocalWindowEffect

__all__ = ["SWEEP", "DistanceOutcome", "WindowSweep", "window_sweep"]

SWEEP = "window"


@dataclass(frozen=True)
class DistanceOutcome:
    """Window-sweep probes whose key token sat ``distance`` tokens from the prompt's end."""

    distance: int
    n: int
    correct: int

    @property
    def accuracy(self) -> float:
        return self.correct / self.n


@dataclass(frozen=True)
class WindowSweep:
    """What a log's window sweep measured.

    ``local_window``: the model's raw window in tokens (``None``: the backend
    reported none); ``by_distance``: every distance probed, ascending;
    ``effect``: the pooled in-window accuracy, ``None`` when the window is
    unknown or no probe fell inside it (``note`` says which).
    """

    local_window: int | None
    by_distance: tuple[DistanceOutcome, ...]
    effect: LocalWindowEffect | None
    note: str

    def inside(self, row: DistanceOutcome) -> bool:
        return self.local_window is not None and row.distance <= self.local_window


def window_sweep(
    records: Iterable[ProbeRecord], *, local_window: int | None, protocol: str
) -> WindowSweep | None:
    """The window sweep of ``records`` (``None`` when they hold no window probe).

    ``protocol`` opens the effect's ``source``; the distances and window size
    are appended to it.
    """
    counts: dict[int, list[int]] = {}
    for r in records:
        if r.sweep != SWEEP:
            continue
        tally = counts.setdefault(r.prompt_tokens - r.key_position, [0, 0])
        tally[0] += 1
        tally[1] += int(r.correct)
    if not counts:
        return None
    rows = tuple(DistanceOutcome(d, n, c) for d, (n, c) in sorted(counts.items()))
    if local_window is None:
        note = "the backend reports no local window; in-window accuracy not measured"
        return WindowSweep(None, rows, None, note)
    inside = [row for row in rows if row.distance <= local_window]
    if not inside:
        note = (
            f"no window probe had its key within the {local_window}-token local window "
            f"(nearest: {rows[0].distance} tokens from the end); in-window accuracy not measured"
        )
        return WindowSweep(local_window, rows, None, note)
    n = sum(row.n for row in inside)
    correct = sum(row.correct for row in inside)
    low, high = wilson_interval(correct, n)
    lo_d, hi_d = inside[0].distance, inside[-1].distance
    effect = LocalWindowEffect(
        accuracy=correct / n,
        n=n,
        ci_low=low,
        ci_high=high,
        min_distance=lo_d,
        max_distance=hi_d,
        source=f"{protocol}; key {lo_d}-{hi_d} tokens from the end, window {local_window}",
    )
    note = f"{correct}/{n} correct with the key {lo_d}-{hi_d} tokens from the end"
    return WindowSweep(local_window, rows, effect, note)
