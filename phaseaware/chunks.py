"""The input type of assembly (one retrieved chunk) and its in-context measurement.

Framework-free on purpose: the LangChain and LlamaIndex adapters build
``Chunk`` objects from their Documents/Nodes and map results back by ``id``.
"""

from __future__ import annotations

import itertools
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from phaseaware.errors import InputError
from phaseaware.evidence import find_key_chars
from phaseaware.filler import CHUNK_SEPARATOR, Filler, PadTable, pad_block
from phaseaware.tokenizers.base import TokenizedText, Tokenizer
from phaseaware.tokenizers.offsets import CharIndex

__all__ = [
    "Chunk",
    "MeasuredChunk",
    "NO_PAD",
    "normalize_chunks",
    "measure_chunks",
    "chunk_pad_tables",
]

NO_PAD = PadTable((0,))  # a chunk that must not be padded


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


@dataclass(frozen=True)
class MeasuredChunk:
    """A chunk measured in context: its token cost and key tokens (see ``measure_chunks``)."""

    chunk: Chunk
    tokens: int  # standalone token count
    key_chars: tuple[int, ...]  # char offsets of keys in the chunk text
    key_tokens: tuple[int, ...]  # standalone token index of each key
    empty: bool


def measure_chunks(
    chunks: Sequence[Chunk], *, tokenizer: Tokenizer, terms: Sequence[str], max_keys: int
) -> tuple[MeasuredChunk, ...]:
    """Token cost and key tokens of every chunk, each measured in the context it will have.

    Every non-empty chunk is measured after a separator and followed by one:
    tokenizers with a parallel ``tokenize_batch`` (``parallel_batch`` true) get one
    batch of ``SEP c_i SEP`` pieces; others get ONE call on ``SEP c0 SEP c1 ... SEP``.
    ``tokens`` counts the chunk plus its trailing separator; ``key_tokens`` are
    relative to the chunk's first token. These are estimates for planning:
    assembly re-measures the rendered prompt and repairs any boundary merge.
    """
    key_chars = [
        ()
        if not chunk.text.strip()
        else find_key_chars(
            chunk.text,
            chunk_id=chunk.id or "",
            evidence=chunk.evidence,
            terms=terms,
            max_keys=max_keys,
        )
        for chunk in chunks
    ]
    texts = [c.text for c in chunks if c.text.strip()]
    if getattr(tokenizer, "parallel_batch", False) and len(texts) > 1:
        counts = _measure_pieces(tokenizer, texts)
    else:
        counts = _measure_joined(tokenizer, texts)
    out: list[MeasuredChunk] = []
    measured = iter(counts)
    for chunk, keys in zip(chunks, key_chars, strict=True):
        if not chunk.text.strip():
            out.append(
                MeasuredChunk(chunk=chunk, tokens=0, key_chars=(), key_tokens=(), empty=True)
            )
            continue
        tokens, locate = next(measured)
        out.append(MeasuredChunk(chunk, tokens, keys, tuple(locate(c) for c in keys), False))
    return tuple(out)


def _measure_joined(tokenizer: Tokenizer, texts: Sequence[str]):
    """(tokens, char → relative token) per text from one call on ``SEP t0 SEP t1 ... SEP``."""
    sep = len(CHUNK_SEPARATOR)
    starts = list(itertools.accumulate((len(t) + sep for t in texts), initial=sep))
    text = CHUNK_SEPARATOR + "".join(t + CHUNK_SEPARATOR for t in texts)
    char_index = getattr(tokenizer, "char_index", None)  # optional: lookups without tuples
    joined = char_index(text) if char_index is not None else tokenizer.tokenize(text)
    first = [joined.token_at_char(s) for s in starts[:-1]] + [len(joined)]
    return [
        (first[k + 1] - first[k], _locator(joined, starts[k], first[k])) for k in range(len(texts))
    ]


def _measure_pieces(tokenizer: Tokenizer, texts: Sequence[str]):
    """(tokens, char → relative token) per text from one batch of ``SEP t SEP`` pieces."""
    sep = len(CHUNK_SEPARATOR)
    batch = [CHUNK_SEPARATOR + t + CHUNK_SEPARATOR for t in texts]
    pieces = tokenizer.tokenize_batch(batch)  # type: ignore[attr-defined]
    out = []
    for piece in pieces:
        first = piece.token_at_char(sep)
        out.append((len(piece) - first, _locator(piece, sep, first)))
    return out


def _locator(tokenized: TokenizedText | CharIndex, char_base: int, token_base: int):
    return lambda c: tokenized.token_at_char(char_base + c) - token_base


def chunk_pad_tables(
    tokenizer: Tokenizer, filler: Filler | None, prepared: Sequence[MeasuredChunk]
) -> tuple[PadTable, ...]:
    """The filler's pad table, re-measured for chunks whose first char could merge with it.

    A chunk starting with whitespace or punctuation (``"\n\nText"``) may merge
    with the pad's last token; its table is measured on its own first 48 chars.
    When that table cannot reach every residue, the chunk is never padded.
    """
    if filler is None:
        return tuple(NO_PAD for _ in prepared)
    out = []
    for prep in prepared:
        text = prep.chunk.text
        if prep.empty or text[:1].isalnum():
            out.append(filler.chunk_pad)
            continue
        head = CHUNK_SEPARATOR + text[:48]
        base = len(tokenizer.encode(head))
        shifts = tuple(
            len(tokenizer.encode(CHUNK_SEPARATOR + pad_block(filler.unit, k) + text[:48])) - base
            for k in range(len(filler.chunk_pad.shifts))
        )
        reachable = {x % filler.period for x in shifts}
        ok = len(reachable) == filler.period and all(x >= 0 for x in shifts)
        out.append(PadTable(shifts) if ok else NO_PAD)
    return tuple(out)
