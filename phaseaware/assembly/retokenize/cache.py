"""The chunk-token cache and the token-starts result type of ``stitch``.

``ChunkTokenCache`` is the bounded, thread-safe LRU that ``assemble`` keeps
chunk cores (and measured pieces) in, keyed by tokenizer fingerprint and text;
``TokenStarts`` is a text's token char starts as a numpy array, with the
lookups ``TokenizedText`` offers.
"""

from __future__ import annotations

import sys
import threading
from collections import OrderedDict
from dataclasses import dataclass

import numpy as np

from phaseaware.caches import register_cache

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


class ChunkTokenCache:
    """Thread-safe LRU of chunk token starts (its core), keyed by (fingerprint, chunk text), byte-capped.

    ``max_bytes`` bounds the sum of each entry's size (its starts array plus
    its key text); the least recently used entries are evicted past it.
    """

    def __init__(self, max_bytes: int = DEFAULT_CACHE_BYTES) -> None:
        if isinstance(max_bytes, bool) or not isinstance(max_bytes, int) or max_bytes < 0:
            raise ValueError(f"max_bytes must be an int >= 0, got {max_bytes!r}")
        self.max_bytes = max_bytes
        self._entries: OrderedDict[tuple[str, str], tuple[CacheEntry, int]] = OrderedDict()
        self._bytes = 0
        self._lock = threading.Lock()
        self.hits = 0
        self.misses = 0

    @property
    def nbytes(self) -> int:
        """Bytes the entries hold now (always <= ``max_bytes``)."""
        return self._bytes

    def __len__(self) -> int:
        return len(self._entries)

    def get(self, key: tuple[str, str]) -> CacheEntry | None:
        with self._lock:
            entry = self._entries.get(key)
            if entry is None:
                self.misses += 1
                return None
            self._entries.move_to_end(key)
            self.hits += 1
            return entry[0]

    def put(self, key: tuple[str, str], entry: CacheEntry) -> None:
        size = entry.nbytes + sys.getsizeof(key[1]) + sys.getsizeof(key) + 64
        if size > self.max_bytes:
            return
        with self._lock:
            old = self._entries.pop(key, None)
            if old is not None:
                self._bytes -= old[1]
            self._entries[key] = (entry, size)
            self._bytes += size
            while self._bytes > self.max_bytes:
                _, (_, dropped) = self._entries.popitem(last=False)
                self._bytes -= dropped

    def peek(self, key: tuple[str, str]) -> bool:
        """Whether ``key`` is cached (no hit or miss counted, LRU order unchanged)."""
        return key in self._entries

    def clear(self) -> None:
        with self._lock:
            self._entries.clear()
            self._bytes = 0


_default = ChunkTokenCache()
register_cache(
    "assembly.chunk_tokens",
    size=lambda: (len(_default), _default.nbytes),
    clear=_default.clear,
    bound=f"LRU, {DEFAULT_CACHE_BYTES // (1024 * 1024)} MiB",
)


def default_cache() -> ChunkTokenCache:
    """The process-wide cache ``assemble`` uses unless told otherwise (64 MiB cap)."""
    return _default
