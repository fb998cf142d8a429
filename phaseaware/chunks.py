"""The input type of assembly: one retrieved chunk of text.

Framework-free on purpose: the LangChain and LlamaIndex adapters build
``Chunk`` objects from their Documents/Nodes and map results back by ``id``.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from phaseaware.errors import InputError

__all__ = ["Chunk", "normalize_chunks"]

@dataclass(frozen=True)
class Chunk:
    """One retrieved chunk.

    ``score`` is its relevance (higher = more relevant; any float). ``evidence``
    lists strings that must occur verbatim in ``text``; their first characters
    mark the key tokens the planner places. Empty ``evidence`` means "find the
    question's key terms in the text". ``id`` defaults to ``chunk-<index>``.
    """

    text: str
    score: float = 0.0
    id: str | None = None
    metadata: Mapping[str, Any] = field(default_factory=dict, compare=False, hash=False)
    evidence: tuple[str, ...] = ()


def normalize_chunks(chunks: Sequence[Chunk | str]) -> tuple[Chunk, ...]:
    """New ``Chunk`` objects with ids filled in (``chunk-<index>``) and types checked.

    Plain strings are accepted as chunks with score 0. Raises ``InputError`` on
    an empty list, a non-string text, a non-finite score or a duplicate id.
    """
    if isinstance(chunks, str | bytes) or not isinstance(chunks, Sequence):
        raise InputError("chunks must be a list of Chunk objects (or strings)")
    if len(chunks) == 0:
        raise InputError("chunks is empty: pass at least one Chunk to assemble")
    out: list[Chunk] = []
    seen: dict[str, int] = {}
    for index, chunk in enumerate(chunks):
        if isinstance(chunk, str):
            chunk = Chunk(text=chunk)
        if not isinstance(chunk, Chunk):
            raise InputError(
                f"chunks[{index}] is a {type(chunk).__name__}; build a phaseaware.Chunk(text=...)"
            )
        if not isinstance(chunk.text, str):
            raise InputError(f"chunks[{index}].text must be a str, got {type(chunk.text).__name__}")
        score = chunk.score
        if isinstance(score, bool) or not isinstance(score, int | float) or score != score:
            raise InputError(f"chunks[{index}].score must be a number, got {score!r}")
        if score in (float("inf"), float("-inf")):
            raise InputError(f"chunks[{index}].score must be finite, got {score!r}")
        evidence = chunk.evidence
        if isinstance(evidence, str):
            evidence = (evidence,)
        evidence = tuple(evidence)
        for item in evidence:
            if not isinstance(item, str) or not item:
                raise InputError(
                    f"chunks[{index}].evidence must hold non-empty strings, got {item!r}"
                )
        chunk_id = chunk.id if chunk.id is not None else f"chunk-{index}"
        if not isinstance(chunk_id, str):
            raise InputError(f"chunks[{index}].id must be a str, got {chunk_id!r}")
        if chunk_id in seen:
            raise InputError(
                f"duplicate chunk id {chunk_id!r} (chunks[{seen[chunk_id]}] and chunks[{index}]); "
                "give every chunk a unique id"
            )
        seen[chunk_id] = index
        out.append(
            Chunk(
                text=chunk.text,
                score=float(score),
                id=chunk_id,
                metadata=dict(chunk.metadata),
                evidence=evidence,
            )
        )
    return tuple(out)
