"""Retrieved records (text, score or missing, id, evidence) as ``Chunk`` objects: one rule.

An adapter reads its framework's objects (a LangChain ``Document``, a LlamaIndex
``NodeWithScore``, a Haystack ``Document``) into :class:`SourceRecord` values, as
given, and :func:`record_chunks` checks and converts them. The rules, the same
for every adapter:

- **Missing scores.** A missing score never outranks a real one. When no record
  has a score, retrieval order is the relevance: the first of ``n`` records scores
  ``n``, the last ``1``. Otherwise every unscored record ranks after every scored
  one, in retrieval order (scores below the lowest real score, one step apart),
  so the planner gives it no more weight than the least relevant scored record.
- **Ids.** Chunk ids are positional, ``doc-<index>`` (the input index of the record),
  so framework ids may be missing or of any type; the report carries each record's
  index and its own id (:func:`phaseaware.integrate.placement_report`).
- **Duplicates**, as hybrid retrievers return them: records with the same framework
  id are one record, by the core's rule
  (:func:`phaseaware.assembly.inputs.chunks.duplicate_groups`): the best-scored copy
  kept (its index is the chunk's), at the place of the first copy, the merge listed
  in ``AssemblyResult.merged_duplicates``; different texts under one id raise
  ``InputError`` naming the id; ``options.duplicate_ids="error"`` refuses any
  duplicate. Records without an id never merge.
- **Bad input.** ``None`` or non-string text, a score that is not a finite number
  (a string, a bool, NaN) or evidence that is not a string or a list of strings
  raises ``InputError`` naming the record (``documents[3]``, ``nodes[0]``).
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Sequence
from dataclasses import dataclass

from phaseaware.assembly.inputs.chunks import (
    DUPLICATE_POLICIES,
    Chunk,
    MergedDuplicate,
    duplicate_groups,
)
from phaseaware.errors import InputError

__all__ = [
    "CHUNK_ID_PREFIX",
    "RecordChunks",
    "SourceRecord",
    "merge_records",
    "record_chunks",
    "record_index",
    "relevance_scores",
]

CHUNK_ID_PREFIX = "doc-"


@dataclass(frozen=True)
class SourceRecord:
    """One retrieved item as its framework holds it; checked by :func:`record_chunks`.

    ``score``: ``None`` when the retriever gave none. ``evidence``: ``None``, a
    string or a sequence of strings that occur verbatim in ``text``. ``id``: the
    framework's id (reported back, never used as the chunk id).
    """

    text: object
    score: object = None
    id: object = None
    evidence: object = None


def relevance_scores(scores: Sequence[float | None]) -> list[float]:
    """Each record's relevance under the missing-score rule (see the module docstring)."""
    real = [s for s in scores if s is not None]
    n = len(scores)
    if not real:
        return [float(n - i) for i in range(n)]
    floor = min(real) - 1.0
    return [float(s) if s is not None else floor - i / n for i, s in enumerate(scores)]


def _score(value: object, where: str) -> float | None:
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, int | float):
        raise InputError(
            f"{where} has score {value!r}: a score must be a number (or missing: then it "
            "ranks after every scored one, in retrieval order); fix the retriever's score"
        )
    try:
        score = float(value)
    except OverflowError:
        raise InputError(f"{where} has a score too large for a float; give a finite one") from None
    if not math.isfinite(score):
        raise InputError(f"{where} has score {value!r}: a score must be finite")
    return score


def _evidence(value: object, where: str) -> tuple[str, ...]:
    if value is None:
        return ()
    items: Iterable[object] = (value,) if isinstance(value, str) else ()
    if not isinstance(value, str):
        if not isinstance(value, list | tuple):
            raise InputError(f"{where} has evidence {value!r}: give a string or a list of strings")
        items = value
    out = []
    for item in items:
        if not isinstance(item, str) or not item:
            raise InputError(
                f"{where} has evidence {value!r}: give a string or a list of non-empty strings"
            )
        out.append(item)
    return tuple(out)


@dataclass(frozen=True)
class RecordChunks:
    """:func:`merge_records`' answer: one chunk per distinct record (order of first
    copies, id ``doc-<index of the kept copy>``) and the merges (record indices)."""

    chunks: list[Chunk]
    merged: tuple[MergedDuplicate, ...]


def merge_records(
    records: Sequence[SourceRecord], *, what: str = "documents", duplicate_ids: str = "merge"
) -> RecordChunks:
    """The records checked and converted, copies under one framework id merged (or, with
    ``duplicate_ids="error"``, refused); rules in the module docstring. ``what`` names
    the records in errors (``documents``, ``nodes``)."""
    if isinstance(records, str | bytes) or not isinstance(records, Sequence):
        raise InputError(f"{what} must be a list, got {type(records).__name__}")
    if duplicate_ids not in DUPLICATE_POLICIES:
        raise InputError(
            f"duplicate_ids must be one of {', '.join(DUPLICATE_POLICIES)}, got {duplicate_ids!r}"
        )
    texts: list[str] = []
    scores: list[float | None] = []
    evidence: list[tuple[str, ...]] = []
    for index, record in enumerate(records):
        where = f"{what}[{index}]"
        if not isinstance(record, SourceRecord):
            raise InputError(f"{where} is a {type(record).__name__}, not a SourceRecord")
        if not isinstance(record.text, str):
            raise InputError(
                f"{where} has text {type(record.text).__name__}: its text must be a string "
                "(drop empty results before assembly)"
            )
        texts.append(record.text)
        scores.append(_score(record.score, where))
        evidence.append(_evidence(record.evidence, where))
    groups = duplicate_groups(
        [r.id for r in records], texts=texts, scores=scores, where=lambda i: f"{what}[{i}]",
        strict=duplicate_ids == "error",
    )  # fmt: skip
    relevance = relevance_scores([scores[i] for i in groups.kept])
    chunks = [
        Chunk(text=texts[i], score=r, id=f"{CHUNK_ID_PREFIX}{i}", evidence=evidence[i])
        for i, r in zip(groups.kept, relevance, strict=True)
    ]
    merged = tuple(
        MergedDuplicate(chunk_id=f"{CHUNK_ID_PREFIX}{kept}", kept=kept, merged=others)
        for kept, others in groups.merged
    )
    return RecordChunks(chunks, merged)


def record_chunks(records: Sequence[SourceRecord], *, what: str = "documents") -> list[Chunk]:
    """One chunk per distinct record, in input order (:func:`merge_records`' chunks)."""
    return merge_records(records, what=what).chunks


def record_index(chunk_id: str) -> int:
    """The input index of the record behind chunk ``chunk_id`` (``doc-<index>``)."""
    if not chunk_id.startswith(CHUNK_ID_PREFIX) or not chunk_id[len(CHUNK_ID_PREFIX) :].isdigit():
        raise InputError(f"chunk id {chunk_id!r} was not made by record_chunks")
    return int(chunk_id[len(CHUNK_ID_PREFIX) :])
