"""The input type of assembly: one retrieved chunk, and the one validator of its fields.

Framework-free on purpose: the LangChain and LlamaIndex adapters build
``Chunk`` objects from their Documents/Nodes and map results back by ``id``.
``Chunk.from_dict`` reads the request format (``phaseaware assemble``'s JSON);
``normalize_chunks`` checks ``Chunk`` objects. Both check fields with the same
functions, so a request and a Python caller get the same rules.

Duplicates, as hybrid and multi-query retrievers return them: items under one id are
one item (:func:`duplicate_groups`, THE rule, used here for chunk ids and by the
integration kit for framework ids): the copy with the best score is kept (the first of
equal ones; a missing score ranks below any real one), at the place of the first copy,
and the merge is reported (:class:`MergedDuplicate`); copies whose texts differ are
refused with ``InputError`` naming the id. ``duplicate_ids="error"`` (the strict mode)
refuses every duplicate id.
"""

from __future__ import annotations

from collections.abc import Callable, Hashable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, cast

from phaseaware.errors import InputError
from phaseaware.limits import MAX_CHUNKS

__all__ = [
    "DUPLICATE_POLICIES",
    "Chunk",
    "DuplicateGroups",
    "MergedDuplicate",
    "NormalizedChunks",
    "chunks_from_request",
    "duplicate_groups",
    "make_chunk",
    "normalize_chunks",
    "normalize_merged",
]

#: ``AssemblyOptions.duplicate_ids``: "merge" (the best-scored copy kept, the merge
#: reported) or "error" (the strict mode: ``InputError`` on any duplicate id).
DUPLICATE_POLICIES = ("merge", "error")


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
    """The chunks with ids filled in (``chunk-<index>``) and types checked; the strict
    mode: ``InputError`` on a duplicate id (:func:`normalize_merged` merges them).

    A chunk already in canonical form (float score, tuple evidence, str id) is
    kept as is (it is frozen); others are rebuilt, never changed in place.

    Plain strings are accepted as chunks with score 0. Raises ``InputError`` on
    an empty list, a non-string text, a non-finite score or a duplicate id.
    """
    return normalize_merged(chunks, duplicate_ids="error").chunks


@dataclass(frozen=True)
class MergedDuplicate:
    """Copies of one item under one id, merged into one (see the module docstring).

    ``chunk_id``: the kept chunk's id; ``kept``: the input index of the copy kept (the
    best score, the first of equal ones); ``merged``: the input indices of the other
    copies, in input order. Input indices count the caller's list, duplicates included.
    """

    chunk_id: str
    kept: int
    merged: tuple[int, ...]


@dataclass(frozen=True)
class DuplicateGroups:
    """:func:`duplicate_groups`' answer: ``kept`` lists the input index of each distinct
    item's kept copy, in the order of each item's first copy; ``merged`` pairs each kept
    index with the indices merged into it (only items that had copies)."""

    kept: tuple[int, ...]
    merged: tuple[tuple[int, tuple[int, ...]], ...]


def duplicate_groups(
    ids: Sequence[object],
    *,
    texts: Sequence[str],
    scores: Sequence[float | None],
    where: Callable[[int], str],
    strict: bool = False,
    noun: str = "id",
) -> DuplicateGroups:
    """THE duplicate rule (module docstring) over parallel lists: ``ids[i]`` (``None``,
    or an unhashable id: never a duplicate), ``texts[i]``, ``scores[i]`` (``None``:
    missing). ``where(i)`` names item ``i`` in errors (``"chunks[3]"``), ``noun`` its id
    (``"chunk id"``). ``InputError`` for copies whose texts differ, or, with ``strict``,
    for any duplicate id."""
    first: dict[Hashable, int] = {}  # id -> the group's slot in ``order``
    order: list[list[int]] = []  # per distinct item: its input indices
    for index, item_id in enumerate(ids):
        if item_id is None or not isinstance(item_id, Hashable):
            order.append([index])
            continue
        try:
            slot = first.setdefault(item_id, len(order))
        except TypeError:  # a hashable type holding an unhashable value
            order.append([index])
            continue
        if slot == len(order):
            order.append([index])
            continue
        original = order[slot][0]
        if strict:
            raise InputError(
                f"duplicate {noun} {item_id!r} ({where(original)} and {where(index)}); give "
                "every item a unique id, or let copies merge (duplicate_ids='merge')"
            )
        if texts[index] != texts[original]:
            raise InputError(
                f"{where(original)} and {where(index)} share the {noun} {item_id!r} but their "
                "texts differ; give each text its own id (a retriever that returns one id "
                "for different texts is mixing up its documents)"
            )
        order[slot].append(index)
    kept: list[int] = []
    merged: list[tuple[int, tuple[int, ...]]] = []
    for group in order:
        best = max(group, key=lambda i: (_rank_score(scores[i]), -i))
        kept.append(best)
        if len(group) > 1:
            merged.append((best, tuple(i for i in group if i != best)))
    return DuplicateGroups(tuple(kept), tuple(merged))


def _rank_score(score: float | None) -> float:
    return float("-inf") if score is None else score


@dataclass(frozen=True)
class NormalizedChunks:
    """:func:`normalize_merged`' answer: the chunks assembly reads (duplicates merged,
    order of first copies) and what was merged (input indices of the caller's list)."""

    chunks: tuple[Chunk, ...]
    merged: tuple[MergedDuplicate, ...]


def normalize_merged(
    chunks: Sequence[Chunk | str], *, duplicate_ids: str = "merge"
) -> NormalizedChunks:
    """:func:`normalize_chunks` with the duplicate rule: copies under one id merged
    (``duplicate_ids="merge"``) or refused (``"error"``); see the module docstring."""
    if duplicate_ids not in DUPLICATE_POLICIES:
        raise InputError(
            f"duplicate_ids must be one of {', '.join(DUPLICATE_POLICIES)}, got {duplicate_ids!r}"
        )
    checked = _checked_chunks(chunks)
    groups = duplicate_groups(
        [c.id for c in checked], texts=[c.text for c in checked],
        scores=[c.score for c in checked], where=lambda i: f"chunks[{i}]",
        strict=duplicate_ids == "error", noun="chunk id",
    )  # fmt: skip
    merged = tuple(
        MergedDuplicate(chunk_id=checked[kept].id or "", kept=kept, merged=others)
        for kept, others in groups.merged
    )
    return NormalizedChunks(tuple(checked[i] for i in groups.kept), merged)


def _checked_chunks(chunks: Sequence[Chunk | str]) -> list[Chunk]:
    """Every chunk checked, ids filled in; duplicates still there."""
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
    return out
