"""The arrangements ``compare`` runs every question under, at the same token budget.

- ``naive``: retrieval order (best score first), no padding;
- ``lost-in-the-middle``: LangChain's ``LongContextReorder`` rule (the most
  relevant chunks at both ends, the least relevant in the middle), no padding;
- ``phase-aware``: phaseaware's planner with the profile (reorder by position
  reliability, pad key tokens onto reliable residues, pad the total length;
  ``repeat`` restates the top evidence before the question);

and two controls, which tell what phase-aware's gain comes from:

- ``order-only``: phase-aware's order (the chunks as phase-aware placed them),
  without padding or repeat: what the order alone does;
- ``placebo``: phase-aware with the profile turned half a period
  (:mod:`phaseaware.compare.placebo`): the same padding and repeats, aimed at the
  residues the profile calls worst: what the padding does without the right residues.

Every arrangement is assembled by the public :func:`phaseaware.assemble`, so
the positions reported are measured on the final prompt. :meth:`Arranger.predicted_accuracy`
reads every arrangement's top evidence with the run's real profile (the placebo's too).
"""

from __future__ import annotations

import dataclasses
import functools
from collections.abc import Sequence
from dataclasses import dataclass
from typing import TypeVar

from phaseaware.assembly import AssemblyOptions, AssemblyResult, Chunk, assemble
from phaseaware.chat.formats import ChatFormat
from phaseaware.chat.layout import PromptLayout
from phaseaware.compare.placebo import placebo_profile
from phaseaware.errors import InputError
from phaseaware.profiles.model import Profile
from phaseaware.tokenizers.base import Tokenizer

__all__ = [
    "ARRANGEMENTS",
    "CONTROLS",
    "LOST_IN_THE_MIDDLE",
    "NAIVE",
    "ORDER_ONLY",
    "PHASE_AWARE",
    "PLACEBO",
    "Arranger",
    "long_context_reorder",
    "parse_arrangements",
]

NAIVE = "naive"
LOST_IN_THE_MIDDLE = "lost-in-the-middle"
PHASE_AWARE = "phase-aware"
ORDER_ONLY = "order-only"
PLACEBO = "placebo"
CONTROLS: tuple[str, ...] = (ORDER_ONLY, PLACEBO)
# every arrangement, in report order: the three compared, then the controls
ARRANGEMENTS: tuple[str, ...] = (NAIVE, LOST_IN_THE_MIDDLE, PHASE_AWARE, *CONTROLS)


def parse_arrangements(text: str) -> tuple[str, ...]:
    """``"naive,phase-aware"`` -> the named arrangements, distinct, in report order.

    Raises ``InputError`` naming an unknown or repeated name, or an empty list."""
    names = [name.strip() for name in text.split(",")]
    if not any(names) or not all(names):
        raise InputError(
            f"--arrangements {text!r}: give comma-separated names of {', '.join(ARRANGEMENTS)}"
        )
    unknown = [name for name in names if name not in ARRANGEMENTS]
    if unknown:
        raise InputError(
            f"--arrangements: unknown arrangement(s) {', '.join(map(repr, unknown))}; use "
            f"comma-separated names of {', '.join(ARRANGEMENTS)}"
        )
    repeated = sorted({name for name in names if names.count(name) > 1})
    if repeated:
        raise InputError(
            f"--arrangements names {', '.join(repeated)} more than once; name each once"
        )
    return tuple(name for name in ARRANGEMENTS if name in names)


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

    @functools.cached_property
    def placebo(self) -> Profile:
        """The placebo's profile, derived once (the caller's profile is left as it is)."""
        return placebo_profile(self.profile)

    def options(self, arrangement: str) -> AssemblyOptions:
        plain = AssemblyOptions(
            strategy="none",
            pad=False,
            repeat=False,
            length_pad=False,
            position_offset=self.position_offset,
        )
        if arrangement in (NAIVE, LOST_IN_THE_MIDDLE, ORDER_ONLY):
            return plain
        if arrangement in (PHASE_AWARE, PLACEBO):
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
        self,
        arrangement: str,
        *,
        chunks: Sequence[Chunk],
        question: str,
        system: str | None,
        phase_aware: AssemblyResult | None = None,
    ) -> AssemblyResult:
        """One question under ``arrangement``. ``phase_aware``: this question's phase-aware
        result when the caller has it (``order-only`` takes its order; else it is assembled)."""
        options = self.options(arrangement)
        ordered: Sequence[Chunk] = chunks
        if arrangement == LOST_IN_THE_MIDDLE:
            ordered = long_context_reorder(chunks)
        elif arrangement == ORDER_ONLY:
            if phase_aware is None:
                phase_aware = self.assemble(
                    PHASE_AWARE, chunks=chunks, question=question, system=system
                )
            ordered = phase_aware_order(chunks, phase_aware)
        return assemble(
            list(ordered),
            tokenizer=self.tokenizer,
            chat_format=self.chat_format,
            question=question,
            system=system,
            profile=self.placebo if arrangement == PLACEBO else self.profile,
            budget_tokens=self.budget_tokens,
            options=options,
        )

    def assemble_question(
        self,
        arrangements: Sequence[str],
        *,
        chunks: Sequence[Chunk],
        question: str,
        system: str | None,
    ) -> dict[str, AssemblyResult]:
        """One question under each of ``arrangements`` (phase-aware assembled once)."""
        results: dict[str, AssemblyResult] = {}
        if PHASE_AWARE in arrangements or ORDER_ONLY in arrangements:
            results[PHASE_AWARE] = self.assemble(
                PHASE_AWARE, chunks=chunks, question=question, system=system
            )
        for arrangement in arrangements:
            if arrangement not in results:
                results[arrangement] = self.assemble(
                    arrangement,
                    chunks=chunks,
                    question=question,
                    system=system,
                    phase_aware=results.get(PHASE_AWARE),
                )
        return {a: results[a] for a in arrangements}

    def predicted_accuracy(self, result: AssemblyResult, chunk_id: str) -> float | None:
        """The run's profile's expected accuracy (0..1) for chunk ``chunk_id`` of ``result``:
        the mean over its key tokens, the restated copy's when that is higher; ``None``
        when it has no key or was dropped. Read with the real profile whichever profile
        assembled ``result`` (the placebo's prediction is the real profile's)."""
        placement = next((p for p in result.placements if p.chunk_id == chunk_id), None)
        if placement is None or not placement.key_token_positions:
            return None
        read = self.profile.position_reliabilities
        offset = self.position_offset
        keys = read(placement.key_token_positions, result.token_count, offset=offset)
        value = sum(keys) / len(keys)
        repeat = result.repeat
        if repeat is not None and repeat.chunk_id == chunk_id and repeat.key_token_positions:
            again = read(repeat.key_token_positions, result.token_count, offset=offset)
            value = max(value, sum(again) / len(again))
        return value


def phase_aware_order(chunks: Sequence[Chunk], phase_aware: AssemblyResult) -> list[Chunk]:
    """``chunks`` in the order phase-aware placed them: the chunks it dropped first (in
    the given order: assembly drops the least relevant, which phase-aware puts first),
    then its placements in context order. A chunk without an id gets the one assembly
    gave it (``chunk-<index>``), so it keeps its name in the new order."""
    named = [c if c.id else dataclasses.replace(c, id=f"chunk-{i}") for i, c in enumerate(chunks)]
    placed = {p.chunk_id: p.order for p in phase_aware.placements}
    return sorted(named, key=lambda c: (c.id in placed, placed.get(c.id or "", -1)))
