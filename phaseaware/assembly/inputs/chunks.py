"""The input type of assembly: one retrieved chunk, and the one validator of its fields.

Framework-free on purpose: the LangChain and LlamaIndex adapters build
``Chunk`` objects from their Documents/Nodes and map results back by ``id``.
``Chunk.from_dict`` reads the request format (``phaseaware assemble``'s JSON);
``normalize_chunks`` checks ``Chunk`` objects. Both check fields with the same
functions, so a request and a Python caller get the same rules.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, cast

from phaseaware.errors import InputError
from phaseaware.limits import MAX_CHUNKS

__all__ = ["Chunk", "make_chunk", "normalize_chunks", "chunks_from_request"]


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

    @classmethod
    def from_dict(cls, item: object, *, where: str = "chunk") -> Chunk:
        """A chunk from a request object ``{"text", "score"?, "id"?, "evidence"?}``.

        ``evidence`` must be a list of strings (null: none). Raises ``InputError``
        naming ``where`` (e.g. ``"request.json: chunks[2]"``) for a bad field.
        """
        if not isinstance(item, dict):
            raise InputError(f"{where} must be an object with 'text'")
        if not isinstance(item.get("text"), str):
            raise InputError(f"{where} is missing key 'text' (a string)")
        evidence = item.get("evidence") or []
        if not isinstance(evidence, list):
            raise InputError(f"{where}.evidence must be a list of strings")
        return cls(
            text=item["text"],
            score=_check_score(item.get("score", 0.0), where),
            id=_check_id(item.get("id"), where),
            evidence=_check_evidence(evidence, where),
        )


def make_chunk(
    *,
    text: object,
    score: object = 0.0,
    id: object = None,  # noqa: A002 - the field's name
    evidence: object = (),
    metadata: Mapping[str, Any] | None = None,
    where: str = "chunk",
) -> Chunk:
    """A checked ``Chunk`` from the parts a framework adapter holds (a Document, a Node).

    The entry point for adapters: ``text`` must be a str (``None`` is refused,
    not turned into ``"None"``), ``score`` a finite number (``None`` is the
    adapter's to resolve first: it has the missing-score rule), ``evidence`` a
    string or a list of non-empty strings. Raises ``InputError`` naming ``where``
    (e.g. ``"documents[2]"``); the caller's objects are never changed.
    """
    if not isinstance(text, str):
        raise InputError(
            f"{where}: the text must be a str, got {type(text).__name__}; "
            "pass the document's text (an empty string for none)"
        )
    if isinstance(evidence, Mapping) or not isinstance(evidence, str | Iterable):
        raise InputError(f"{where}.evidence must be a list of strings, got {evidence!r}")
    return Chunk(
        text=text,
        score=_check_score(score, where),
        id=_check_id(id, where),
        metadata=dict(metadata or {}),
        evidence=_check_evidence(evidence, where),
    )


def chunks_from_request(items: object, *, source: str = "<request>") -> list[Chunk]:
    """The ``chunks`` list of a request document (``InputError`` naming ``source``)."""
    if not isinstance(items, list):
        raise InputError(f"{source}: key 'chunks' must be a list of objects")
    return [Chunk.from_dict(item, where=f"{source}: chunks[{n}]") for n, item in enumerate(items)]


_FINITE = (float("-inf"), float("inf"))


def _check_score(score: object, where: str) -> float:
    if isinstance(score, bool) or not isinstance(score, int | float) or score != score:
        raise InputError(f"{where}.score must be a number, got {score!r}")
    try:
        value = float(score)
    except OverflowError:
        raise InputError(f"{where}.score is too large for a float; give a finite number") from None
    if value in (float("inf"), float("-inf")):
        raise InputError(f"{where}.score must be finite, got {score!r}")
    return value


def _check_id(chunk_id: object, where: str) -> str | None:
    if chunk_id is not None and not isinstance(chunk_id, str):
        raise InputError(f"{where}.id must be a str, got {chunk_id!r}")
    if chunk_id is not None:
        try:
            chunk_id.encode("utf-8")
        except UnicodeEncodeError:
            raise InputError(
                f"{where}.id {chunk_id!r} holds a lone surrogate; give a valid Unicode string"
            ) from None
    return chunk_id


def _check_evidence(evidence: object, where: str) -> tuple[str, ...]:
    items = (evidence,) if isinstance(evidence, str) else tuple(cast(Iterable[object], evidence))
    checked: list[str] = []
    for item in items:
        if not isinstance(item, str) or not item:
            raise InputError(f"{where}.evidence must hold non-empty strings, got {item!r}")
        checked.append(item)
    return tuple(checked)


def normalize_chunks(chunks: Sequence[Chunk | str]) -> tuple[Chunk, ...]:
    """The chunks with ids filled in (``chunk-<index>``) and types checked.

    A chunk already in canonical form (float score, tuple evidence, str id) is
    kept as is (it is frozen); others are rebuilt, never changed in place.

    Plain strings are accepted as chunks with score 0. Raises ``InputError`` on
    an empty list, a non-string text, a non-finite score or a duplicate id.
    """
    if isinstance(chunks, str | bytes) or not isinstance(chunks, Sequence):
        raise InputError("chunks must be a list of Chunk objects (or strings)")
    if len(chunks) == 0:
        raise InputError("chunks is empty: pass at least one Chunk to assemble")
    if len(chunks) > MAX_CHUNKS:
        raise InputError(
            f"chunks holds {len(chunks)} chunks; at most {MAX_CHUNKS} are assembled at once: "
            "keep the best-ranked ones (a prompt holds a few hundred)"
        )
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
        score, evidence, chunk_id = chunk.score, chunk.evidence, chunk.id
        # the checks below are the validators' own; skipped only where they return as is
        if type(score) is not float or not _FINITE[0] < score < _FINITE[1]:
            score = _check_score(score, f"chunks[{index}]")
        if type(evidence) is not tuple or not all(type(e) is str and e for e in evidence):
            evidence = _check_evidence(evidence, f"chunks[{index}]")
        if chunk_id is not None:  # always: a str id may still hold a lone surrogate
            chunk_id = _check_id(chunk_id, f"chunks[{index}]")
        if chunk_id is None:
            chunk_id = f"chunk-{index}"
        if chunk_id in seen:
            raise InputError(
                f"duplicate chunk id {chunk_id!r} (chunks[{seen[chunk_id]}] and chunks[{index}]); "
                "give every chunk a unique id"
            )
        seen[chunk_id] = index
        if score is chunk.score and evidence is chunk.evidence and chunk_id is chunk.id:
            out.append(chunk)  # already canonical; frozen, and assembly never reads metadata
            continue
        out.append(
            Chunk(
                text=chunk.text,
                score=score,
                id=chunk_id,
                metadata=dict(chunk.metadata),
                evidence=evidence,
            )
        )
    return tuple(out)
