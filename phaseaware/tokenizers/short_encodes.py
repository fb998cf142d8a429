"""Encodes of short texts that recur call after call, kept: ``encode_short(tokenizer, text)``.

A warm ``assemble`` encodes the same few short texts every time (the template's prefix
and suffix, the chunk separator, the repeated evidence block); each costs a tokenizer
call. Their ids are kept here, keyed by the tokenizer object and the exact text, so a call repeats none of them. The entry holds
the tokenizer itself (its ``id`` is not reused while the entry lives) and is used only
for that same object; ``encode`` is pure, so a kept entry equals a fresh encode.
Bounded: texts up to :data:`MAX_CHARS` characters (longer ones are encoded, not kept),
:data:`MAX_ENTRIES` entries, least recently used evicted.
"""

from __future__ import annotations

from phaseaware.caches import BoundedCache
from phaseaware.tokenizers.base import Tokenizer

__all__ = ["MAX_CHARS", "MAX_ENTRIES", "encode_short"]

MAX_CHARS = 4096
MAX_ENTRIES = 4096

_KEPT: BoundedCache[tuple[int, str], tuple[Tokenizer, tuple[int, ...]]] = BoundedCache(
    max_entries=MAX_ENTRIES,
    name="tokenizers.short_encodes",
    bound=f"LRU, {MAX_ENTRIES} entries of texts up to {MAX_CHARS} characters",
)


def encode_short(tokenizer: Tokenizer, text: str) -> list[int]:
    """``tokenizer.encode(text)``, kept for short texts (a new list each call)."""
    if len(text) > MAX_CHARS:
        return tokenizer.encode(text)
    key = (id(tokenizer), text)
    known = _KEPT.get(key)
    if known is not None and known[0] is tokenizer:
        return list(known[1])
    ids = tokenizer.encode(text)
    _KEPT.put(key, (tokenizer, tuple(ids)))
    return list(ids)
