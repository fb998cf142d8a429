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
    ``spread_keys`` (``--period auto``): base prompt ``b`` puts its offset-0 key at residue
    ``b mod n_offsets`` instead of 0, so over the base prompts a key's position mod any
    candidate period is not tied to its offset (its distance to the question): an effect
    of the offset cannot pass for a period, and every period up to ``n_offsets`` is
    identifiable. Left out of :meth:`to_dict` when off, so earlier runs keep their
    fingerprints.
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
    spread_keys: bool = False

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
        if not self.spread_keys:
            del doc["spread_keys"]
        return doc

    def key_residue(self, base_index: int) -> int:
        """The residue (mod ``n_offsets``) of base prompt ``base_index``'s offset-0 key."""
        return base_index % self.n_offsets if self.spread_keys else 0

    @property
    def probes_per_base(self) -> int:
        return self.n_offsets * len(self.sweeps)
