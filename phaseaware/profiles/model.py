"""The profile: a model's measured (or published) accuracy by residue, and THE reliability model.

Format v1 is a JSON document (schema ``phaseaware.profile/v1``); this module
holds the in-memory form. Conversion to and from the document
(``profile_from_dict`` / ``profile_to_dict``), loading and atomic saving live in
``phaseaware.profiles.io``, the schema checks in ``phaseaware.profiles.schema``,
lookup by model name in ``phaseaware.profiles.registry``.

``Profile`` checks only the structural invariants its methods rely on
(``period >= 1``; every per-residue tuple has ``period`` entries); value ranges
are checked by the schema when a document is read or written.

Every expected-accuracy number phaseaware reports or plans with comes from the
methods here: a key token at absolute position ``t`` with ``d`` tokens from it to
the end of the prompt (``d = prompt_length - t``) has reliability

* ``window_reliability()`` when ``d <= local_window`` (read raw, uncompressed),
* else ``residue_reliability(t)`` (shrunken reliability, else raw accuracy, of
  residue ``t % period``),

times ``length_factor(prompt_length)`` for a known length-residue effect.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Literal

import numpy as np

from phaseaware.errors import ProfileError

__all__ = [
    "SCHEMA",
    "Profile",
    "TokenizerRef",
    "Provenance",
    "LengthResidueEffect",
    "LocalWindowEffect",
]

SCHEMA = "phaseaware.profile/v1"


@dataclass(frozen=True)
class TokenizerRef:
    """Which tokenizer the residues were counted with."""

    spec: str | None
    fingerprint: str | None  # None for published profiles whose tokenizer is not shipped


@dataclass(frozen=True)
class Provenance:
    kind: Literal["measured", "published"]
    source: str
    # How the figures were measured, in words (a calibration's sweep, or the paper's
    # method). A stored profile field, so it keeps this name; it is not the Tokenizer
    # protocols of ``tokenizers.base``. Older profiles say "template" in it for the
    # chat format: free text, read as written.
    protocol: str
    created: str  # ISO 8601 date or datetime
    tool_version: str


@dataclass(frozen=True)
class LengthResidueEffect:
    """Accuracy by residue of the *total prompt length* (in tokens) mod ``period``.

    ``accuracy[r]`` is ``None`` where nothing is known. ``kind`` says where the
    figures come from: ``"measured"`` (a calibration sweep) or ``"field-report"``
    (an observed failure, e.g. DeepSeek-V4-Flash-0731 failing at length ≡ 3 mod 4).
    """

    period: int
    accuracy: tuple[float | None, ...]
    kind: Literal["measured", "field-report"]
    source: str
    n: tuple[int | None, ...] | None = None
    note: str | None = None


@dataclass(frozen=True)
class LocalWindowEffect:
    """Measured accuracy when the key token sits inside the raw local window.

    The window is read uncompressed, so an ideal model retrieves there at least
    as well as on its best residue; a real one may not (a small model trained
    mostly on far keys, say). ``n`` probes, 95% interval ``[ci_low, ci_high]``,
    with key-to-end distances between ``min_distance`` and ``max_distance``
    tokens.
    """

    accuracy: float
    n: int
    ci_low: float
    ci_high: float
    min_distance: int
    max_distance: int
    source: str


@dataclass(frozen=True)
class Profile:
    """Per-residue retrieval accuracy of one model.

    ``residue_accuracy[r]`` is the fraction (0..1) of probes answered correctly
    when the key token's absolute position ``t`` satisfies ``t % period == r``.
    ``reliability`` (optional) holds shrunken estimates the planner prefers over
    raw accuracies; when absent the raw accuracies are used.
    """

    model: str
    period: int
    residue_accuracy: tuple[float, ...]
    n: tuple[int | None, ...]
    ci_low: tuple[float | None, ...]
    ci_high: tuple[float | None, ...]
    tokenizer: TokenizerRef
    local_window: int | None
    provenance: Provenance
    compression_stride: int | None = None
    length_residue_accuracy: LengthResidueEffect | None = None
    reliability: tuple[float, ...] | None = None
    local_window_accuracy: LocalWindowEffect | None = None
    extra: dict[str, object] = field(default_factory=dict, compare=False, hash=False)

    def __post_init__(self) -> None:
        if isinstance(self.period, bool) or not isinstance(self.period, int) or self.period < 1:
            raise ProfileError(f"profile period must be an int >= 1, got {self.period!r}")
        per_residue = {
            "residue_accuracy": self.residue_accuracy,
            "n": self.n,
            "ci_low": self.ci_low,
            "ci_high": self.ci_high,
        }
        if self.reliability is not None:
            per_residue["reliability"] = self.reliability
        for name, values in per_residue.items():
            if len(values) != self.period:
                raise ProfileError(
                    f"profile {name} has {len(values)} entries but period is {self.period}; "
                    f"give one value per residue 0..{self.period - 1}"
                )

    def residue_reliability(self, residue: int) -> float:
        """Reliability (0..1) the planner uses for a key token at ``residue``."""
        return self.planner_reliabilities()[residue % self.period]

    def best_reliability(self) -> float:
        """The best residue's reliability."""
        return max(self.planner_reliabilities())

    def planner_reliabilities(self) -> tuple[float, ...]:
        """Per-residue reliabilities: shrunken ones when the profile has them, else raw accuracies."""
        return self.reliability if self.reliability is not None else self.residue_accuracy

    def key_reliability_lookup(self, *, offset: int = 0) -> Callable[[int, int], float]:
        """The key reliability without the length factor, as an O(1) lookup ``f(t, d)``
        for the planner's inner loops (the pad and order searches).

        ``t`` indexes the prompt's tokens and the model sees token ``t`` at ``t + offset``
        (tokens its server adds first, e.g. a BOS); ``d`` is the distance to the end.
        The rule is the module docstring's; ``position_reliabilities`` is the same rule
        vectorised, times the length factor (a property test keeps the two equal, and
        both equal the scalar definition kept in ``tests/support/reliability_reference.py``).
        """
        period, window = self.period, self.local_window
        values = [self.residue_reliability(r + offset) for r in range(period)]
        inside = self.window_reliability()

        def reliability(t: int, d: int) -> float:
            if window is not None and d <= window:
                return inside
            return values[t % period]

        return reliability

    def position_reliabilities(
        self, positions: Sequence[int], prompt_length: int, *, offset: int = 0
    ) -> list[float]:
        """Expected accuracy (0..1) of key tokens at prompt ``positions`` of a
        ``prompt_length``-token prompt that the model sees shifted by ``offset``: THE
        reliability method, vectorised (one numpy pass).

        A position past the end counts as the last token. Each value is
        ``window_reliability()`` within ``local_window`` tokens of the end, else the
        residue's reliability at ``t + offset``, times ``length_factor(prompt_length +
        offset)``.
        """
        if not len(positions):
            return []
        period, window = self.period, self.local_window
        table = np.asarray([self.residue_reliability(r + offset) for r in range(period)])
        t = np.minimum(np.asarray(positions, dtype=np.int64), prompt_length - 1)
        base = table[t % period]
        if window is not None:
            base = np.where(prompt_length - t <= window, self.window_reliability(), base)
        values: list[float] = (base * self.length_factor(prompt_length + offset)).tolist()
        return values

    def gaps(self) -> dict[str, str]:
        """What the profile says it lacks (``extra["lacks"]``: a field name -> why, and how to
        measure it), e.g. a profile from ``phaseaware score`` whose log held no key inside
        the model's local window. Empty for a complete profile."""
        lacks = self.extra.get("lacks")
        if not isinstance(lacks, dict):
            return {}
        return {str(k): str(v) for k, v in lacks.items()}

    def window_reliability(self) -> float:
        """Reliability of a key token inside the raw local window.

        The measured ``local_window_accuracy`` when the profile has one; else
        the best residue's value (the window is read uncompressed, so the
        architecture promises no phase effect there; not a measurement).
        """
        if self.local_window_accuracy is not None:
            return self.local_window_accuracy.accuracy
        return self.best_reliability()

    def length_factor(self, prompt_length: int) -> float:
        """Multiplier (0..1) for a prompt of ``prompt_length`` tokens; 1.0 when unknown."""
        effect = self.length_residue_accuracy
        if effect is None:
            return 1.0
        known = [a for a in effect.accuracy if a is not None]
        value = effect.accuracy[prompt_length % effect.period]
        if value is None or not known:
            return 1.0
        # Relative to the best known length residue, so a flat effect is neutral.
        best = max(max(known), 1e-12)
        return min(1.0, value / best) if value < best else 1.0
