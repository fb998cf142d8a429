"""The reference model's held-out RAG questions, shipped as a ``phaseaware compare`` input.

``data/rag_questions.jsonl`` holds the demo's 400 questions (seed 0): exactly
what :func:`~phaseaware.demo.rag_questions.make_questions` generates with the
demo's settings, written by ``python -m phaseaware.demo.questions_file`` (a
test checks the file against the generator). ``phaseaware compare
--reference-questions`` and ``phaseaware demo`` read it.
"""

from __future__ import annotations

import json
import sys
from collections.abc import Sequence
from pathlib import Path

from phaseaware.atomic import atomic_write_text
from phaseaware.compare.questions import CompareQuestion, read_questions
from phaseaware.demo.rag_questions import RagQuestion, make_questions, without_evidence

__all__ = [
    "QUESTIONS_FILE",
    "SHIPPED_QUESTIONS",
    "CHUNKS_PER_QUESTION",
    "MAX_FILLER_SENTENCES",
    "BUDGET_TOKENS",
    "QUESTION_SEED_BASE",
    "as_compare_questions",
    "demo_questions",
    "reference_questions",
    "write_questions_file",
]

QUESTIONS_FILE = Path(__file__).resolve().parent / "data" / "rag_questions.jsonl"
SHIPPED_QUESTIONS = 400
# The RAG questions: 5 retrieved chunks, each a sentence tail, 1..8 filler
# sentences and one fact (about 280 tokens a prompt); the budget admits them all.
# Calibration probes the same (phaseaware.reference.probe_defaults).
CHUNKS_PER_QUESTION = 5
MAX_FILLER_SENTENCES = 8
BUDGET_TOKENS = 512
# A seed stream disjoint from calibration's, so the questions are held out.
QUESTION_SEED_BASE = 10_000


def as_compare_questions(questions: Sequence[RagQuestion]) -> list[CompareQuestion]:
    """The demo's questions as ``compare`` inputs (ids ``q0``, ``q1``, ...; chunks kept in
    retrieval order, the accepted answer the asked number)."""
    return [
        CompareQuestion(
            id=f"q{i}", question=q.question, chunks=q.chunks, answers=(q.answer,), system=None
        )
        for i, q in enumerate(questions)
    ]


def reference_questions() -> list[CompareQuestion]:
    """The shipped questions (``data/rag_questions.jsonl``)."""
    return read_questions(QUESTIONS_FILE)


def demo_questions(
    *, count: int, seed: int, evidence_strings: bool = True
) -> list[CompareQuestion]:
    """The demo's ``count`` questions for ``seed``: the shipped file's first ``count`` for
    seed 0 (when it holds that many), else generated the same way."""
    if seed == 0 and count <= SHIPPED_QUESTIONS and evidence_strings:
        return reference_questions()[:count]
    questions = make_questions(
        count=count,
        seed=QUESTION_SEED_BASE + seed,
        chunks_per_question=CHUNKS_PER_QUESTION,
        max_filler_sentences=MAX_FILLER_SENTENCES,
    )
    return as_compare_questions(questions if evidence_strings else without_evidence(questions))


def generated_lines() -> str:
    """The shipped file's content, from the generator."""
    questions = as_compare_questions(
        make_questions(
            count=SHIPPED_QUESTIONS,
            seed=QUESTION_SEED_BASE,
            chunks_per_question=CHUNKS_PER_QUESTION,
            max_filler_sentences=MAX_FILLER_SENTENCES,
        )
    )
    lines = [json.dumps(q.to_dict(), ensure_ascii=False, sort_keys=True) for q in questions]
    return "\n".join(lines) + "\n"


def write_questions_file(path: Path = QUESTIONS_FILE) -> None:
    atomic_write_text(path, generated_lines())


if __name__ == "__main__":
    write_questions_file(Path(sys.argv[1]) if len(sys.argv) > 1 else QUESTIONS_FILE)
