"""The input of ``phaseaware compare``: one question per JSONL line.

A line is an object with ``question`` (string), ``chunks`` (list of
``{"text", "score", "id", "evidence"?}``, in any order: retrieval order is by
``score``, highest first, ties by position), ``answer`` (a string or a list of
accepted strings), optional ``system`` (a system prompt) and optional ``id``
(default ``line-N``). Every field is checked; a bad line raises ``InputError``
naming the file, the line and the fix. Nothing is dropped silently.
"""

from __future__ import annotations

import hashlib
import json
import os
from collections.abc import Sequence
from dataclasses import dataclass

from phaseaware.assembly.inputs.chunks import Chunk
from phaseaware.errors import InputError
from phaseaware.userfiles import jsonl_lines, parse_json_document, read_user_text

__all__ = ["CompareQuestion", "read_questions", "questions_digest", "MAX_QUESTION_FILE"]

MAX_QUESTION_FILE = 512 * 1024 * 1024  # bytes
_FIELDS = frozenset({"id", "question", "chunks", "answer", "system"})


@dataclass(frozen=True)
class CompareQuestion:
    """One question: its retrieved ``chunks`` in retrieval order (best score first),
    the accepted ``answers`` and an optional ``system`` prompt."""

    id: str
    question: str
    chunks: tuple[Chunk, ...]
    answers: tuple[str, ...]
    system: str | None = None

    @property
    def top_evidence_id(self) -> str | None:
        """The chunk whose placement is reported: the best-scored chunk that names
        ``evidence``, else the best-scored chunk."""
        for chunk in self.chunks:
            if chunk.evidence:
                return chunk.id
        return self.chunks[0].id if self.chunks else None

    def to_dict(self) -> dict[str, object]:
        """The JSONL form (``read_questions`` reads it back to an equal question)."""
        doc: dict[str, object] = {
            "id": self.id,
            "question": self.question,
            "chunks": [
                {"text": c.text, "score": c.score, "id": c.id, "evidence": list(c.evidence)}
                for c in self.chunks
            ],
            "answer": list(self.answers),
        }
        if self.system is not None:
            doc["system"] = self.system
        return doc


def _answers(value: object, where: str) -> tuple[str, ...]:
    items = [value] if isinstance(value, str) else value
    if (
        not isinstance(items, list)
        or not items
        or not all(isinstance(a, str) and a.strip() for a in items)
    ):
        raise InputError(
            f"{where}: 'answer' must be a non-empty string or a list of them, got {value!r:.60}"
        )
    return tuple(items)


def question_from_dict(doc: object, *, where: str, default_id: str) -> CompareQuestion:
    """One question from its JSON object (``InputError`` naming ``where`` otherwise)."""
    if not isinstance(doc, dict):
        raise InputError(f"{where}: expected a JSON object with question, chunks and answer")
    unknown = sorted(set(doc) - _FIELDS)
    if unknown:
        raise InputError(
            f"{where}: unknown field(s) {', '.join(unknown)}; a line holds "
            f"{', '.join(sorted(_FIELDS))}"
        )
    question = doc.get("question")
    if not isinstance(question, str) or not question.strip():
        raise InputError(f"{where}: 'question' must be a non-empty string")
    chunks_doc = doc.get("chunks")
    if not isinstance(chunks_doc, list) or not chunks_doc:
        raise InputError(f"{where}: 'chunks' must be a non-empty list of chunk objects")
    chunks = [
        Chunk.from_dict(item, where=f"{where}: chunks[{i}]") for i, item in enumerate(chunks_doc)
    ]
    ids = [c.id for c in chunks]
    if any(i is None for i in ids) or len(set(ids)) != len(ids):
        raise InputError(f"{where}: every chunk needs a unique 'id' (the report names chunks)")
    system = doc.get("system")
    if system is not None and not isinstance(system, str):
        raise InputError(f"{where}: 'system' must be a string")
    qid = doc.get("id", default_id)
    if not isinstance(qid, str | int) or isinstance(qid, bool) or not str(qid):
        raise InputError(f"{where}: 'id' must be a non-empty string or an integer")
    order = sorted(range(len(chunks)), key=lambda i: (-chunks[i].score, i))
    return CompareQuestion(
        id=str(qid),
        question=question,
        chunks=tuple(chunks[i] for i in order),
        answers=_answers(doc.get("answer"), where),
        system=system,
    )


def read_questions(path: str | os.PathLike[str]) -> list[CompareQuestion]:
    """Every question of the JSONL file at ``path`` (blank lines skipped; ids unique)."""
    name = os.fspath(path)
    text = read_user_text(path, what="questions file", max_bytes=MAX_QUESTION_FILE)
    questions: list[CompareQuestion] = []
    seen: set[str] = set()
    for number, line in enumerate(jsonl_lines(text), start=1):
        if not line.strip():
            continue
        where = f"{name} line {number}"
        doc = parse_json_document(line, source=where, hint="one JSON object per line")
        q = question_from_dict(doc, where=where, default_id=f"line-{number}")
        if q.id in seen:
            raise InputError(f"{where}: id {q.id!r} is used twice; give every question its own id")
        seen.add(q.id)
        questions.append(q)
    if not questions:
        raise InputError(f"{name} holds no question; write one JSON object per line")
    return questions


def questions_digest(questions: Sequence[CompareQuestion]) -> str:
    """``sha256:<hex>`` of the questions' canonical JSON: equal iff the same questions."""
    h = hashlib.sha256()
    for q in questions:
        h.update(json.dumps(q.to_dict(), sort_keys=True, ensure_ascii=False).encode("utf-8"))
        h.update(b"\n")
    return "sha256:" + h.hexdigest()
