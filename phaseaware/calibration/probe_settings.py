"""What a calibration probes: :class:`ProbeSettings` and the sweep names."""

from __future__ import annotations

from dataclasses import asdict, dataclass
from typing import Any

from phaseaware.calibration import task
from phaseaware.errors import CalibrationError

__all__ = ["SWEEPS", "DEFAULT_SWEEPS", "ProbeSettings"]

SWEEPS: tuple[str, ...] = ("key", "length", "window")
DEFAULT_SWEEPS: tuple[str, ...] = ("key", "length")


@dataclass(frozen=True)
class ProbeSettings:
    """What to probe. Lengths in tokens; ``depth`` is a fraction range of the haystack.

    ``n_offsets``: offsets ``0..n_offsets-1`` per sweep (the period, or the
    largest period considered when the period is detected).
    """

    context_tokens: int
    n_offsets: int
    base_prompts: int
    sweeps: tuple[str, ...] = DEFAULT_SWEEPS
    seed: int = 0
    distractors: int = 3
    max_tokens: int = 8
    depth: tuple[float, float] = (0.15, 0.6)
    system: str | None = None

    def __post_init__(self) -> None:
        if self.n_offsets < 1:
            raise CalibrationError(f"the period must be >= 1, got {self.n_offsets} (--period)")
        if self.base_prompts < 1:
            raise CalibrationError(
                f"need at least 1 base prompt, got {self.base_prompts} (--base-prompts)"
            )
        bad = [s for s in self.sweeps if s not in SWEEPS]
        if bad or not self.sweeps:
            raise CalibrationError(
                f"unknown sweeps {bad or '(none)'}; use --sweeps with names from "
                f"{','.join(SWEEPS)}, e.g. --sweeps key,length"
            )
        if not 0 <= self.distractors < len(task.NAMES):
            raise CalibrationError(f"distractors must be 0..{len(task.NAMES) - 1}")

    def to_dict(self) -> dict[str, Any]:
        doc = asdict(self)
        doc["sweeps"], doc["depth"] = list(self.sweeps), list(self.depth)
        return doc

    @property
    def probes_per_base(self) -> int:
        return self.n_offsets * len(self.sweeps)
