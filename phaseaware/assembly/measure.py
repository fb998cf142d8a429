"""Chunks measured in context: token cost and key tokens, from one tokenizer call.

Estimates for planning only: ``verify`` re-tokenizes the rendered prompt and
repairs any boundary merge. Optional tokenizer capabilities
(``ParallelBatchTokenizer``, ``CharIndexTokenizer``) pick a faster route with the
same result; a tokenizer with only the base protocol takes ``tokenize``.
"""

from __future__ import annotations

import itertools
from collections.abc import Callable, Sequence
from dataclasses import dataclass

import numpy as np

from phaseaware.assembly.chunks import Chunk
from phaseaware.assembly.evidence import chunk_key_chars
from phaseaware.assembly.render import CHUNK_SEPARATOR
from phaseaware.assembly.stitch import (
    ChunkTokenCache,
    TokenStarts,
    cached_pieces,
    stitched_starts,
    windowed_support,
)
from phaseaware.tokenizers.base import (
    CharIndexTokenizer,
    ParallelBatchTokenizer,
    TokenizedText,
    Tokenizer,
)
from phaseaware.tokenizers.offsets import CharIndex

__all__ = ["MeasuredChunk", "measure_chunks"]

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
    With a ``cache`` and a tokenizer ``stitch.windowed_support`` accepts, the
    one call is stitched from cached chunk tokens (the same starts, proven); the
    pieces' encodes also fill the chunk-core cache that verification stitches
    from (``stitch.seed_cores``), so a cold assemble encodes each chunk once.
    """
    key_chars = chunk_key_chars(chunks, terms=terms, max_keys=max_keys)
    texts = [c.text for c in chunks if c.text.strip()]
    if (
        isinstance(tokenizer, ParallelBatchTokenizer)
        and tokenizer.parallel_batch
        and len(texts) > 1
    ):
        counts = (
            _measure_pieces(tokenizer, texts)
            if cache is None
            else _measure_pieces(
                tokenizer,
                texts,
                cache=cache,
                fingerprint=tokenizer.fingerprint(),
                key_chars=[k for c, k in zip(chunks, key_chars, strict=True) if c.text.strip()],
            )
        )
    else:
        keyed = [k for c, k in zip(chunks, key_chars, strict=True) if c.text.strip()]
        counts = _measure_joined(tokenizer, texts, cache, keyed)
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
    joined: TokenizedText | CharIndex | TokenStarts
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
    encodes also seed the chunk cores (``stitch.seed_cores``). ``key_chars``
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
    known = _laid_lookups(pieces, sep, key_chars) if key_chars is not None else None
    out: list[_Measured] = []
    for k, piece in enumerate(pieces):
        if known is None:
            first = piece.token_at_char(sep)
            out.append((len(piece) - first, _locator(piece, sep, first)))
            continue
        first, keys = known[k]
        out.append((len(piece) - first, _prefetched(piece, sep, first, keys)))
    return out


def _laid_lookups(
    pieces: Sequence[TokenizedText | TokenStarts], sep: int, key_chars: Sequence[Sequence[int]]
) -> list[tuple[int, dict[int, int]]]:
    """Per piece: ``token_at_char(sep)`` and ``{c: token_at_char(sep + c) - that}`` per key.

    The pieces' starts are laid end to end (piece k at its char base); each
    starts with a token at 0, so a character's token in the laid array minus
    the piece's first token index is its token in the piece.
    """
    arrays = [np.asarray(p.starts, dtype=np.int64) for p in pieces]
    lengths = [p.text_length if isinstance(p, TokenStarts) else len(p.text) for p in pieces]
    char_base = list(itertools.accumulate(lengths[:-1], initial=0))
    queries: list[int] = []
    for base, keys, length in zip(char_base, key_chars, lengths, strict=True):
        if any(not 0 <= sep + c < length for c in keys):
            raise IndexError(f"key char outside a piece of {length} chars")
        queries.append(base + sep)
        queries.extend(base + sep + c for c in keys)
    laid = np.concatenate([a + b for a, b in zip(arrays, char_base, strict=True)])
    q = np.asarray(queries, dtype=np.int64)
    found = np.searchsorted(laid, q, side="left")
    hit = laid[np.minimum(found, laid.size - 1)] == q
    at = iter(np.where(hit, found, found - 1).tolist())
    out: list[tuple[int, dict[int, int]]] = []
    token_base = 0
    for array, keys in zip(arrays, key_chars, strict=True):
        own = next(at)
        out.append((own - token_base, {c: next(at) - own for c in keys}))
        token_base += array.size
    return out


def _prefetched(
    tokenized: TokenizedText | TokenStarts, char_base: int, token_base: int, known: dict[int, int]
) -> Callable[[int], int]:
    def locate(c: int) -> int:
        found = known.get(c)
        return tokenized.token_at_char(char_base + c) - token_base if found is None else found

    return locate


def _locator(
    tokenized: TokenizedText | CharIndex | TokenStarts, char_base: int, token_base: int
) -> Callable[[int], int]:
    return lambda c: tokenized.token_at_char(char_base + c) - token_base
