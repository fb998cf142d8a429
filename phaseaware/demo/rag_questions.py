"""Held-out RAG questions in the reference model's task language.

Each question comes with retrieved chunks (filler prose plus one fact each) and
retrieval scores. Exactly one chunk holds the fact asked about; the others hold
distractor facts. Like the output of a fixed-size text splitter, every chunk
starts inside a sentence (the last 2..9 words of a filler sentence), then whole
sentences follow; so the key token of any chunk lands on every residue mod 8
equally often when chunks are concatenated in any fixed order (a unit test
counts this).
"""

from __future__ import annotations

from dataclasses import dataclass, replace

import numpy as np

from phaseaware.assembly.inputs.chunks import Chunk
from phaseaware.calibration import task

__all__ = ["RagQuestion", "make_questions", "without_evidence"]


@dataclass(frozen=True)
class RagQuestion:
    """One question, its retrieved chunks (in retrieval order) and the answer."""

    question: str
    answer: str
    key_name: str
    evidence_chunk_id: str
    chunks: tuple[Chunk, ...]


def make_questions(
    *,
    count: int,
    seed: int,
    chunks_per_question: int = 4,
    max_filler_sentences: int = 3,
) -> list[RagQuestion]:
    """``count`` seeded questions; chunks are returned sorted by score, best first.

    The evidence chunk scores highest in most questions but not all, as with a
    real retriever. Every chunk holds a sentence tail, then
    1..``max_filler_sentences`` filler sentences around its fact.
    """
    if count < 1 or chunks_per_question < 1 or max_filler_sentences < 1:
        raise ValueError("count, chunks_per_question and max_filler_sentences must be >= 1")
    rng = np.random.default_rng(seed)
    questions = []
    for index in range(count):
        names = rng.choice(len(task.NAMES), size=chunks_per_question, replace=False)
        numbers = rng.choice(len(task.NUMBERS), size=chunks_per_question, replace=False)
        chunks = []
        for slot, (name_i, number_i) in enumerate(zip(names, numbers, strict=True)):
            sentences = [
                task.filler_sentence(rng)
                for _ in range(1 + int(rng.integers(max_filler_sentences)))
            ]
            record = task.record_text(task.NAMES[name_i], task.NUMBERS[number_i])
            sentences.insert(int(rng.integers(len(sentences) + 1)), record)
            words = task.filler_sentence(rng).split()
            sentences.insert(0, " ".join(words[int(rng.integers(8)) :]))  # a sentence tail
            is_evidence = slot == 0
            score = float(rng.uniform(0.70, 0.95) if is_evidence else rng.uniform(0.40, 0.85))
            chunks.append(
                Chunk(
                    text=" ".join(sentences),
                    score=round(score, 4),
                    id=f"q{index}-c{slot}",
                    evidence=(task.NAMES[name_i],) if is_evidence else (),
                )
            )
        chunks.sort(key=lambda c: (-c.score, c.id))
        key_name = task.NAMES[names[0]]
        questions.append(
            RagQuestion(
                question=task.question_text(key_name),
                answer=task.NUMBERS[numbers[0]],
                key_name=key_name,
                evidence_chunk_id=f"q{index}-c0",
                chunks=tuple(chunks),
            )
        )
    return questions


def without_evidence(questions: list[RagQuestion]) -> list[RagQuestion]:
    """The same questions with every chunk's evidence strings removed (default evidence)."""
    return [replace(q, chunks=tuple(replace(c, evidence=()) for c in q.chunks)) for q in questions]
