"""Chunks measured in context: token cost and key tokens, from one tokenizer call.

Estimates for planning only: ``verify`` re-tokenizes the rendered prompt and
repairs any boundary merge. Optional tokenizer capabilities
(``ParallelBatchTokenizer``, ``CharIndexTokenizer``) pick a faster route with the
same result; a tokenizer with only the base protocol takes ``tokenize``.
"""

from __future__ import annotations

import itertools
from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace
from typing import cast

import numpy as np

from phaseaware.assembly.evidence.keys import chunk_key_chars
from phaseaware.assembly.inputs.chunks import Chunk
from phaseaware.assembly.prepare.render import CHUNK_SEPARATOR
from phaseaware.assembly.retokenize.windowed import (
    ChunkTokenCache,
    cached_pieces,
    stitched_starts,
    windowed_support,
)
from phaseaware.tokenizers.base import (
    CharIndexTokenizer,
    ParallelBatchTokenizer,
    TokenizedText,
    Tokenizer,
    implements,
)
from phaseaware.tokenizers.bound import max_token_bytes, min_tokens
from phaseaware.tokenizers.offsets import TokenStarts

__all__ = ["MeasuredChunk", "drop_oversize", "measure_chunks"]

# (tokens, char offset in the text -> token index relative to the text's first token)
_Measured = tuple[int, Callable[[int], int]]


@dataclass(frozen=True)
class MeasuredChunk:
    """A chunk measured in context: its token cost and key tokens (see ``measure_chunks``)."""

    chunk: Chunk
    tokens: int  # in-context token count, trailing separator included
    key_chars: tuple[int, ...]  # char offsets of keys in the chunk text
    key_tokens: tuple[int, ...]  # token index of each key, relative to the chunk's first token
    empty: bool


def measure_chunks(
    chunks: Sequence[Chunk],
    *,
    tokenizer: Tokenizer,
    terms: Sequence[str],
    max_keys: int,
    cache: ChunkTokenCache | None = None,
) -> tuple[MeasuredChunk, ...]:
    """Token cost and key tokens of every chunk, each measured in the context it will have.

    Every non-empty chunk is measured after a separator and followed by one:
    tokenizers whose batch runs in parallel (``ParallelBatchTokenizer`` with
    ``parallel_batch`` true) get one batch of ``SEP c_i SEP`` pieces; others get
    ONE call on ``SEP c0 SEP c1 ... SEP``. ``tokens`` counts the chunk plus its
    trailing separator; ``key_tokens`` are relative to the chunk's first token.
    With a ``cache`` and a tokenizer ``retokenize.windowed.windowed_support`` accepts, the
    one call is stitched from cached chunk tokens (the same starts, proven); the
    pieces' encodes also fill the chunk-core cache that verification stitches
    from (``retokenize.windowed.seed_cores``), so a cold assemble encodes each chunk once.
    """
    key_chars = _key_chars(chunks, terms=terms, max_keys=max_keys, cache=cache)
    full = [bool(c.text.strip()) for c in chunks]
    texts = [c.text for c, f in zip(chunks, full, strict=True) if f]
    keyed = [k for k, f in zip(key_chars, full, strict=True) if f]
    parallel = (
        implements(tokenizer, ParallelBatchTokenizer)
        and cast(ParallelBatchTokenizer, tokenizer).parallel_batch
        and len(texts) > 1
    )
    remembered = None
    if cache is not None:  # the same set measured before: its numbers, read back
        remembered = (tokenizer.fingerprint(), parallel, tuple(texts), tuple(keyed))
        known = cache.measured_sets.get(remembered)
        if known is not None:
            return _from_known(chunks, key_chars, full, known)
    if parallel:
        batch = cast(ParallelBatchTokenizer, tokenizer)
        counts = (
            _measure_pieces(batch, texts)
            if cache is None
            else _measure_pieces(
                batch,
                texts,
                cache=cache,
                fingerprint=tokenizer.fingerprint(),
                key_chars=keyed,
            )
        )
    else:
        counts = _measure_joined(tokenizer, texts, cache, keyed)
    out: list[MeasuredChunk] = []
    measured = iter(counts)
    for chunk, keys, nonempty in zip(chunks, key_chars, full, strict=True):
        if not nonempty:
            out.append(
                MeasuredChunk(chunk=chunk, tokens=0, key_chars=(), key_tokens=(), empty=True)
            )
            continue
        tokens, locate = next(measured)
        if isinstance(locate, _Keyed) and locate.keys is keys:
            key_tokens = locate.key_tokens
        else:
            key_tokens = tuple(locate(c) for c in keys)
        out.append(MeasuredChunk(chunk, tokens, keys, key_tokens, False))
    if cache is not None and remembered is not None:
        cache.measured_sets.put(
            remembered, tuple((m.tokens, m.key_tokens) for m in out if not m.empty)
        )
    return tuple(out)


def _from_known(
    chunks: Sequence[Chunk],
    key_chars: Sequence[tuple[int, ...]],
    full: Sequence[bool],
    known: tuple[tuple[int, tuple[int, ...]], ...],
) -> tuple[MeasuredChunk, ...]:
    """``measure_chunks``'s chunks from a remembered measurement of the same set."""
    numbers = iter(known)
    out: list[MeasuredChunk] = []
    for chunk, keys, nonempty in zip(chunks, key_chars, full, strict=True):
        if not nonempty:
            out.append(
                MeasuredChunk(chunk=chunk, tokens=0, key_chars=(), key_tokens=(), empty=True)
            )
            continue
        tokens, key_tokens = next(numbers)
        out.append(MeasuredChunk(chunk, tokens, keys, key_tokens, False))
    return tuple(out)


def _key_chars(
    chunks: Sequence[Chunk], *, terms: Sequence[str], max_keys: int, cache: ChunkTokenCache | None
) -> tuple[tuple[int, ...], ...]:
    """``chunk_key_chars``, remembered per retrieved set in ``cache.key_sets`` (the same
    texts, evidence, terms and ``max_keys`` give the same keys)."""
    if cache is None:
        return chunk_key_chars(chunks, terms=terms, max_keys=max_keys)
    texts = tuple(c.text for c in chunks)
    key = (tuple(terms), max_keys, texts, tuple(tuple(c.evidence) for c in chunks))
    known = cache.key_sets.get(key)
    if known is None:
        known = chunk_key_chars(chunks, terms=terms, max_keys=max_keys)
        cache.key_sets.put(key, known)
    return known


def drop_oversize(
    chunks: Sequence[Chunk], *, tokenizer: Tokenizer, budget: int
) -> tuple[tuple[Chunk, ...], dict[int, str]]:
    """Chunks whose length alone proves them over the whole budget, emptied before any
    tokenizer sees them (a 100 MB document must not reach a tokenizer that would allocate
    gigabytes), with the reason each is dropped; the others unchanged. The bound is
    ``tokenizers.bound``'s (sound only where it returns one; otherwise nothing is dropped
    here and the chunk is measured as before)."""
    k = max_token_bytes(tokenizer)
    if k is None or all(len(c.text) <= budget for c in chunks):  # cannot exceed: fast path
        return tuple(chunks), {}
    out: list[Chunk] = []
    dropped: dict[int, str] = {}
    for i, chunk in enumerate(chunks):
        least = min_tokens(len(chunk.text), k)
        if least > budget:
            dropped[i] = (
                f"over budget: its {len(chunk.text)} characters are at least {least} tokens "
                f"(no token of {tokenizer.spec} spans over {k} bytes), budget is {budget}; "
                "not tokenized"
            )
            out.append(replace(chunk, text="", evidence=()))
        else:
            out.append(chunk)
    return tuple(out), dropped


def _measure_joined(
    tokenizer: Tokenizer,
    texts: Sequence[str],
    cache: ChunkTokenCache | None = None,
    key_chars: Sequence[Sequence[int]] | None = None,
) -> list[_Measured]:
    """(tokens, char → relative token) per text from one call on ``SEP t0 SEP t1 ... SEP``."""
    sep = len(CHUNK_SEPARATOR)
    starts = list(itertools.accumulate((len(t) + sep for t in texts), initial=sep))
    text = CHUNK_SEPARATOR + "".join(t + CHUNK_SEPARATOR for t in texts)
    joined: TokenizedText | TokenStarts
    if cache is not None and windowed_support(tokenizer) is None:
        spans = [(s, s + len(t)) for s, t in zip(starts, texts, strict=False)]
        joined = stitched_starts(tokenizer, text, spans, cache=cache)
    elif isinstance(tokenizer, CharIndexTokenizer):  # lookups without building tuples
        joined = tokenizer.char_index(text)
    else:
        joined = tokenizer.tokenize(text)
    if isinstance(joined, TokenStarts):
        if key_chars is not None:  # one vectorised lookup for every key
            joined.prefetch(
                [s + c for s, keys in zip(starts, key_chars, strict=False) for c in keys], ()
            )
        first = joined.tokens_at_chars(starts[:-1]) + [len(joined)]
    else:
        first = [joined.token_at_char(s) for s in starts[:-1]] + [len(joined)]
    return [
        (first[k + 1] - first[k], _locator(joined, starts[k], first[k])) for k in range(len(texts))
    ]


def _measure_pieces(
    tokenizer: ParallelBatchTokenizer,
    texts: Sequence[str],
    *,
    cache: ChunkTokenCache | None = None,
    fingerprint: str = "",
    key_chars: Sequence[Sequence[int]] | None = None,
) -> list[_Measured]:
    """(tokens, char → relative token) per text from one batch of ``SEP t SEP`` pieces.

    Each piece depends on its text alone, so with a ``cache`` the pieces of
    texts seen before come from it and only the others are tokenized; their
    encodes also seed the chunk cores (``retokenize.windowed.seed_cores``). ``key_chars``
    are looked up in one ``searchsorted`` over the pieces laid end to end.
    """
    sep = len(CHUNK_SEPARATOR)
    framed = [CHUNK_SEPARATOR + t + CHUNK_SEPARATOR for t in texts]
    if cache is None:
        pieces: Sequence[TokenizedText | TokenStarts] = list(tokenizer.tokenize_batch(framed))
    else:
        pieces = cached_pieces(
            tokenizer, framed, cache, fingerprint=fingerprint, chunks=texts, offset=sep
        )
    if key_chars is None:
        out: list[_Measured] = []
        for piece in pieces:
            first = piece.token_at_char(sep)
            out.append((len(piece) - first, _locator(piece, sep, first)))
        return out
    firsts, keyed = _laid_lookups(pieces, sep, key_chars)
    return [
        (len(piece) - first, _Keyed(piece, sep, first, keys, found))
        for piece, first, keys, found in zip(pieces, firsts, key_chars, keyed, strict=True)
    ]


def _laid_lookups(
    pieces: Sequence[TokenizedText | TokenStarts], sep: int, key_chars: Sequence[Sequence[int]]
) -> tuple[list[int], list[tuple[int, ...]]]:
    """Per piece: ``token_at_char(sep)``, and ``token_at_char(sep + c)`` minus that per key.

    The pieces' starts are laid end to end (piece k at its char base) and looked
    up in one ``searchsorted``; each piece starts with a token at 0, so a
    character's token in the laid array minus the piece's first token index is
    its token in the piece.
    """
    arrays = [np.asarray(p.starts, dtype=np.int64) for p in pieces]
    lengths = [p.text_length if isinstance(p, TokenStarts) else len(p.text) for p in pieces]
    counts = [a.size for a in arrays]
    char_base = list(itertools.accumulate(lengths[:-1], initial=0))
    queries: list[int] = []
    for base, keys, length in zip(char_base, key_chars, lengths, strict=True):
        if any(not 0 <= sep + c < length for c in keys):
            raise IndexError(f"key char outside a piece of {length} chars")
        queries.append(base + sep)
        queries.extend(base + sep + c for c in keys)
    laid = np.concatenate(arrays)
    laid += np.repeat(np.asarray(char_base, dtype=np.int64), counts)
    q = np.asarray(queries, dtype=np.int64)
    found = np.searchsorted(laid, q, side="left")
    hit = laid[np.minimum(found, laid.size - 1)] == q
    at = np.where(hit, found, found - 1)
    n_keys = np.asarray([len(k) for k in key_chars], dtype=np.int64)
    heads = np.cumsum(n_keys + 1) - n_keys - 1  # each piece's own query
    own = at[heads]
    is_key = np.ones(at.size, dtype=bool)
    is_key[heads] = False
    relative = (at[is_key] - np.repeat(own, n_keys)).tolist()
    token_base = np.cumsum([0, *counts[:-1]], dtype=np.int64)
    bounds = list(itertools.accumulate(n_keys.tolist(), initial=0))
    keyed = [tuple(relative[bounds[k] : bounds[k + 1]]) for k in range(len(pieces))]
    return (own - token_base).tolist(), keyed


class _Keyed:
    """A piece's locator with its key chars' answers precomputed (``key_tokens``)."""

    __slots__ = ("_piece", "_sep", "_first", "keys", "key_tokens")

    def __init__(
        self,
        piece: TokenizedText | TokenStarts,
        sep: int,
        first: int,
        keys: Sequence[int],
        key_tokens: tuple[int, ...],
    ) -> None:
        self._piece, self._sep, self._first = piece, sep, first
        self.keys, self.key_tokens = keys, key_tokens

    def __call__(self, c: int) -> int:
        return self._piece.token_at_char(self._sep + c) - self._first


def _locator(
    tokenized: TokenizedText | TokenStarts, char_base: int, token_base: int
) -> Callable[[int], int]:
    return lambda c: tokenized.token_at_char(char_base + c) - token_base
