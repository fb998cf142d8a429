"""The arrangements ``compare`` runs every question under, at the same token budget.

- ``naive``: retrieval order (best score first), no padding;
- ``lost-in-the-middle``: LangChain's ``LongContextReorder`` rule (the most
  relevant chunks at both ends, the least relevant in the middle), no padding;
- ``phase-aware``: phaseaware's planner with the profile (reorder by position
  reliability, pad key tokens onto reliable residues, pad the total length;
  ``repeat`` restates the top evidence before the question).

Every arrangement is assembled by the public :func:`phaseaware.assemble`, so
the positions reported are measured on the final prompt.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import TypeVar

from phaseaware.assembly import AssemblyOptions, AssemblyResult, Chunk, assemble
from phaseaware.chat.formats import ChatFormat
from phaseaware.chat.layout import PromptLayout
from phaseaware.errors import InputError
from phaseaware.profiles.model import Profile
from phaseaware.tokenizers.base import Tokenizer

__all__ = ["ARRANGEMENTS", "PHASE_AWARE", "Arranger", "long_context_reorder"]

PHASE_AWARE = "phase-aware"
ARRANGEMENTS: tuple[str, ...] = ("naive", "lost-in-the-middle", PHASE_AWARE)

T = TypeVar("T")


def long_context_reorder(items: Sequence[T]) -> list[T]:
    """The ``LongContextReorder`` arrangement of ``items`` given best-first.

    Walks from least to most relevant, alternately prepending and appending,
    so the most relevant items sit at both ends and the least in the middle.
    """
    arranged: list[T] = []
    for i, item in enumerate(reversed(items)):
        if i % 2 == 1:
            arranged.append(item)
        else:
            arranged.insert(0, item)
    return arranged


@dataclass(frozen=True)
class Arranger:
    """Assembles one question under one arrangement (``budget_tokens``: prompt tokens,
    template included; ``position_offset``: tokens the server adds before the prompt)."""

    tokenizer: Tokenizer
    chat_format: str | ChatFormat | PromptLayout
    profile: Profile
    budget_tokens: int
    repeat: bool = False
    position_offset: int = 0

    def options(self, arrangement: str) -> AssemblyOptions:
        plain = AssemblyOptions(
            strategy="none",
            pad=False,
            repeat=False,
            length_pad=False,
            position_offset=self.position_offset,
        )
        if arrangement in ("naive", "lost-in-the-middle"):
            return plain
        if arrangement == PHASE_AWARE:
            return AssemblyOptions(
                strategy="reorder",
                pad=True,
                repeat=self.repeat,
                length_pad=True,
                position_offset=self.position_offset,
            )
        raise InputError(
            f"unknown arrangement {arrangement!r}; use one of {', '.join(ARRANGEMENTS)}"
        )

    def assemble(
        self, arrangement: str, *, chunks: Sequence[Chunk], question: str, system: str | None
    ) -> AssemblyResult:
        options = self.options(arrangement)
        ordered = long_context_reorder(chunks) if arrangement == "lost-in-the-middle" else chunks
        return assemble(
            list(ordered),
            tokenizer=self.tokenizer,
            chat_format=self.chat_format,
            question=question,
            system=system,
            profile=self.profile,
            budget_tokens=self.budget_tokens,
            options=options,
        )
