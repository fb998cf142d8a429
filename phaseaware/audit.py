"""Audit an existing prompt: where does each piece of evidence land, and how reliably?

Every position is measured: the prompt is tokenized once and the first
character of each evidence occurrence is mapped to the token containing it
(``TokenizedText.token_at_char``). Expected accuracy is
``profile.position_reliability(position, prompt_length=token_count)``, which
includes the raw local window and any length-residue effect.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from phaseaware.assembly.options import check_position_offset
from phaseaware.errors import InputError
from phaseaware.profiles.model import Profile
from phaseaware.profiles.registry import check_tokenizer
from phaseaware.serialize import to_plain
from phaseaware.tokenizers.base import Tokenizer

__all__ = ["Occurrence", "EvidenceAudit", "LengthAudit", "AuditResult", "audit_prompt"]


@dataclass(frozen=True)
class Occurrence:
    """One occurrence: its first char (prompt offset) and the token containing it."""

    char_offset: int
    token_position: int
    residue: int
    expected_accuracy: float
    in_local_window: bool


@dataclass(frozen=True)
class EvidenceAudit:
    """Every occurrence of one evidence string; ``best_expected_accuracy`` is derived."""

    text: str
    found: bool
    best_expected_accuracy: float | None = field(init=False)  # None: not found
    occurrences: tuple[Occurrence, ...]  # in prompt order

    def __post_init__(self) -> None:
        best = max((o.expected_accuracy for o in self.occurrences), default=None)
        object.__setattr__(self, "best_expected_accuracy", best)


@dataclass(frozen=True)
class LengthAudit:
    """The total prompt length's residue under the profile's length-residue effect."""

    period: int
    residue: int
    accuracy: float | None  # None: nothing known for this residue
    factor: float  # multiplier applied to every position (1.0 = no effect)
    kind: str
    source: str


@dataclass(frozen=True)
class AuditResult:
    token_count: int
    profile: str
    period: int
    tokenizer: str
    evidence: tuple[EvidenceAudit, ...]
    length: LengthAudit | None
    tokenizer_mismatch_allowed: bool = False  # profile fingerprint differs; caller opted in

    def to_dict(self) -> dict[str, Any]:
        """Plain JSON-ready dict (lists, not tuples), stable key order."""
        plain: dict[str, Any] = to_plain(self)
        return plain


def audit_prompt(
    prompt_text: str,
    *,
    tokenizer: Tokenizer,
    profile: Profile,
    evidence: Sequence[str],
    max_occurrences: int = 100,
    position_offset: int = 0,
    allow_tokenizer_mismatch: bool = False,
) -> AuditResult:
    """Measured position, residue and expected accuracy of each evidence occurrence.

    ``prompt_text`` is the full text the model sees (template included).
    Evidence that does not occur is reported with ``found=False``.
    ``position_offset``: tokens the server adds before the prompt (1 for a BOS
    the text lacks); residues and accuracies are taken at the model's
    positions (token position + offset), token positions stay prompt indices.
    Raises ``FingerprintMismatchError`` when ``profile`` was measured with
    another tokenizer, unless ``allow_tokenizer_mismatch`` (the result then
    says so in ``tokenizer_mismatch_allowed``).
    """
    check_position_offset(position_offset, name="position_offset")
    matched = check_tokenizer(profile, tokenizer, allow_mismatch=allow_tokenizer_mismatch)
    mismatch_allowed = not matched and profile.tokenizer.fingerprint is not None
    if not isinstance(prompt_text, str) or not prompt_text:
        raise InputError("prompt_text must be a non-empty string (the full prompt the model sees)")
    if isinstance(evidence, str):
        evidence = [evidence]
    if not evidence or any(not isinstance(e, str) or not e for e in evidence):
        raise InputError("give at least one non-empty evidence string (--evidence TEXT)")
    tokenized = tokenizer.tokenize(prompt_text)
    length = len(tokenized)
    model_length = length + position_offset
    window = profile.local_window
    audits: list[EvidenceAudit] = []
    for item in evidence:
        occurrences: list[Occurrence] = []
        start = prompt_text.find(item)
        while start >= 0 and len(occurrences) < max_occurrences:
            position = tokenized.token_at_char(start)
            occurrences.append(
                Occurrence(
                    char_offset=start,
                    token_position=position,
                    residue=(position + position_offset) % profile.period,
                    expected_accuracy=profile.position_reliability(
                        position + position_offset, prompt_length=model_length
                    ),
                    in_local_window=window is not None and length - position <= window,
                )
            )
            start = prompt_text.find(item, start + 1)
        audits.append(
            EvidenceAudit(text=item, found=bool(occurrences), occurrences=tuple(occurrences))
        )
    return AuditResult(
        token_count=length,
        profile=profile.model,
        period=profile.period,
        tokenizer=tokenizer.spec,
        evidence=tuple(audits),
        length=_length_audit(profile, model_length),
        tokenizer_mismatch_allowed=mismatch_allowed,
    )


def _length_audit(profile: Profile, length: int) -> LengthAudit | None:
    effect = profile.length_residue_accuracy
    if effect is None:
        return None
    residue = length % effect.period
    return LengthAudit(
        period=effect.period,
        residue=residue,
        accuracy=effect.accuracy[residue],
        factor=profile.length_factor(length),
        kind=effect.kind,
        source=effect.source,
    )
