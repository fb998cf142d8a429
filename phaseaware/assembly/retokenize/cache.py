"""The chunk-token cache and the token-starts result type of ``retokenize.windowed``.

``ChunkTokenCache`` is the bounded, thread-safe LRU that ``assemble`` keeps
chunk cores (and measured pieces) in, keyed by tokenizer fingerprint and text;
``TokenStarts`` is a text's token char starts as a numpy array, with the
lookups ``TokenizedText`` offers.
"""

from __future__ import annotations

import sys
from dataclasses import dataclass

import numpy as np

from phaseaware.caches import BoundedCache

__all__ = ["DEFAULT_CACHE_BYTES", "CacheEntry", "ChunkTokenCache", "default_cache"]


@dataclass(frozen=True, eq=False)
class CacheEntry:
    """A chunk's core ``[a, b)`` (chunk-relative) and its token starts; None: no core.

    ``whole`` (from ``seed_cores``): the starts of every token in the chunk, the
    core's being ``whole[i_a:i_b]``; the head ``whole[:i_a]`` (tail
    ``whole[i_b:]``) are those of ``[0, a)`` (``[b, len)``) alone when
    ``head_ok`` (``tail_ok``).
    """

    a: int
    b: int
    starts: np.ndarray | None
    whole: np.ndarray | None = None
    i_a: int = 0
    i_b: int = 0
    head_ok: bool = False
    tail_ok: bool = False

    @property
    def nbytes(self) -> int:
        held = self.whole if self.whole is not None else self.starts
        return 80 + (int(held.nbytes) if held is not None else 0)


DEFAULT_CACHE_BYTES = 64 * 1024 * 1024


def _entry_bytes(key: tuple[str, str], entry: CacheEntry) -> int:
    """An entry's size: its starts array plus its key text."""
    return entry.nbytes + sys.getsizeof(key[1]) + sys.getsizeof(key) + 64


class ChunkTokenCache(BoundedCache[tuple[str, str], CacheEntry]):
    """Thread-safe LRU of chunk token starts (its core), keyed by (fingerprint, chunk text), byte-capped.

    ``max_bytes`` bounds the sum of each entry's size (its starts array plus
    its key text); the least recently used entries are evicted past it
    (``caches.BoundedCache``).
    """

    def __init__(self, max_bytes: int = DEFAULT_CACHE_BYTES, *, name: str | None = None) -> None:
        super().__init__(max_bytes=max_bytes, size_of=_entry_bytes, name=name)


_default = ChunkTokenCache(name="assembly.chunk_tokens")


def default_cache() -> ChunkTokenCache:
    """The process-wide cache ``assemble`` uses unless told otherwise (64 MiB cap)."""
    return _default
