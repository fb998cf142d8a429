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
    one call is stitched from cached chunk tokens (the same starts, proven).
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
            else _measure_pieces(tokenizer, texts, cache=cache, fingerprint=tokenizer.fingerprint())
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
) -> list[_Measured]:
    """(tokens, char → relative token) per text from one batch of ``SEP t SEP`` pieces.

    Each piece depends on its text alone, so with a ``cache`` the pieces of
    texts seen before come from it and only the others are tokenized.
    """
    sep = len(CHUNK_SEPARATOR)
    if cache is None:
        pieces: Sequence[TokenizedText | TokenStarts] = list(
            tokenizer.tokenize_batch([CHUNK_SEPARATOR + t + CHUNK_SEPARATOR for t in texts])
        )
    else:
        pieces = cached_pieces(
            tokenizer,
            [CHUNK_SEPARATOR + t + CHUNK_SEPARATOR for t in texts],
            cache,
            fingerprint=fingerprint,
        )
    out: list[_Measured] = []
    for piece in pieces:
        first = piece.token_at_char(sep)
        out.append((len(piece) - first, _locator(piece, sep, first)))
    return out


def _locator(
    tokenized: TokenizedText | CharIndex | TokenStarts, char_base: int, token_base: int
) -> Callable[[int], int]:
    return lambda c: tokenized.token_at_char(char_base + c) - token_base
