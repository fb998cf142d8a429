"""The chunk-token cache and the token-starts result type of ``retokenize.windowed``.

``ChunkTokenCache`` is the bounded, thread-safe LRU that ``assemble`` keeps
chunk cores (and measured pieces) in, keyed by tokenizer fingerprint and text,
with the default evidence of the last retrieved sets beside them (``key_sets``);
``TokenStarts`` is a text's token char starts as a numpy array, with the
lookups ``TokenizedText`` offers.
"""

from __future__ import annotations

import sys
from dataclasses import dataclass

import numpy as np

from phaseaware.caches import BoundedCache
from phaseaware.tokenizers.windowing import Encode

__all__ = [
    "DEFAULT_CACHE_BYTES",
    "JOIN_BYTES",
    "KEY_SET_BYTES",
    "CacheEntry",
    "ChunkTokenCache",
    "KeySet",
    "default_cache",
]


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
KEY_SET_BYTES = 16 * 1024 * 1024  # the texts the remembered sets' keys hold, at most
JOIN_BYTES = 4 * 1024 * 1024  # remembered junction encodes (texts and starts), at most

#: A retrieved set's default-evidence key: (question terms, max keys, texts, evidence).
KeySet = tuple[tuple[str, ...], int, tuple[str, ...], tuple[tuple[str, ...], ...]]
#: A measured set's key: (fingerprint, parallel pieces?, non-empty texts, their key chars).
MeasuredSet = tuple[str, bool, tuple[str, ...], tuple[tuple[int, ...], ...]]


def _entry_bytes(key: tuple[str, str], entry: CacheEntry) -> int:
    """An entry's size: its starts array plus its key text."""
    return entry.nbytes + sys.getsizeof(key[1]) + sys.getsizeof(key) + 64


class ChunkTokenCache(BoundedCache[tuple[str, str], CacheEntry]):
    """Thread-safe LRU of chunk token starts (its core), keyed by (fingerprint, chunk text), byte-capped.

    ``max_bytes`` bounds the sum of each entry's size (its starts array plus
    its key text); the least recently used entries are evicted past it
    (``caches.BoundedCache``).

    ``key_sets``: the key char offsets of whole retrieved sets (default evidence weighs
    the question's terms across the set, so a set is one entry), LRU, capped at
    :data:`KEY_SET_BYTES` of the texts their keys hold; emptied with the cache. What
    assembling the same chunks again reuses lives in one object: a fresh cache is cold.
    ``joins``: the token starts of the junction texts verification encoded (the text
    between cached chunk cores, joined: :meth:`remembering`), capped at :data:`JOIN_BYTES`.
    ``measured_sets``: each retrieved set's measurement (per non-empty chunk: its tokens in
    context and its key tokens), keyed by the tokenizer's fingerprint, the texts and their
    key chars, capped at :data:`KEY_SET_BYTES` like ``key_sets``.
    """

    def __init__(self, max_bytes: int = DEFAULT_CACHE_BYTES, *, name: str | None = None) -> None:
        super().__init__(max_bytes=max_bytes, size_of=_entry_bytes, name=name)
        self.key_sets: BoundedCache[KeySet, tuple[tuple[int, ...], ...]] = BoundedCache(
            max_bytes=min(max_bytes, KEY_SET_BYTES), size_of=_key_set_bytes
        )

        self.joins: BoundedCache[tuple[str, str], np.ndarray] = BoundedCache(
            max_bytes=min(max_bytes, JOIN_BYTES), size_of=_join_bytes
        )
        self.measured_sets: BoundedCache[MeasuredSet, tuple[tuple[int, tuple[int, ...]], ...]] = (
            BoundedCache(max_bytes=min(max_bytes, KEY_SET_BYTES), size_of=_measured_set_bytes)
        )

    def clear(self) -> None:
        super().clear()
        self.key_sets.clear()
        self.joins.clear()
        self.measured_sets.clear()

    def remembering(self, encode: Encode, fingerprint: str) -> Encode:
        """``encode`` (a family's one-text encode), answered from ``joins`` for a text it
        was given before (the same junctions come back when the same chunks are assembled
        again); the starts handed out are read-only."""

        def remembered(text: str) -> np.ndarray:
            key = (fingerprint, text)
            found = self.joins.get(key)
            if found is None:
                found = encode(text)
                found.flags.writeable = False
                self.joins.put(key, found)
            return found

        return remembered


def _join_bytes(key: tuple[str, str], starts: np.ndarray) -> int:
    return sys.getsizeof(key[1]) + int(starts.nbytes) + 160


def _measured_set_bytes(key: MeasuredSet, measured: tuple[tuple[int, tuple[int, ...]], ...]) -> int:
    """A measured set's size: its texts and numbers (an estimate; bounds the memo)."""
    keys = sum(8 * len(k) + 64 for k in key[3])
    return sum(sys.getsizeof(t) for t in key[2]) + keys + sum(8 * len(k) + 80 for _, k in measured)


def _key_set_bytes(key: KeySet, keys: tuple[tuple[int, ...], ...]) -> int:
    """A remembered set's size: its texts and offsets (an estimate; bounds the memo)."""
    return sum(sys.getsizeof(t) for t in key[2]) + 64 * (len(keys) + 1) + 8 * sum(map(len, keys))


_default = ChunkTokenCache(name="assembly.chunk_tokens")


def default_cache() -> ChunkTokenCache:
    """The process-wide cache ``assemble`` uses unless told otherwise (64 MiB cap)."""
    return _default
