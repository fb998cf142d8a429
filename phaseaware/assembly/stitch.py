"""Token starts of a long text stitched from cached chunk tokenizations, proven equal.

``stitched_starts`` returns exactly ``tokenizer.char_index(text).starts``; the
chunk texts inside ``text`` are tokenized once (``ChunkTokenCache``) and only the
short *junctions* between them are encoded on each call. Every result is an
exact tokenization, never an estimate: where the argument below does not hold
(a tokenizer other than tiktoken's cl100k/o200k patterns), the whole text is
encoded (``verification == "full"``).

Soundness (tiktoken, ``CL100K_PATTERN`` and ``O200K_PATTERN``). tiktoken splits
the text at special-token occurrences, splits each ordinary stretch with its
pre-tokenizer regex into pieces (leftmost-first, contiguous: the alternatives
cover every character), and byte-pair merges inside each piece only. So the
tokens of ``T`` are the tokens of ``T[:p]`` followed by those of ``T[p:]``
whenever ``p`` is a piece boundary of ``T`` that (a) no special-token string
spans, and (b) splits the same way when the text ends (or starts) there. We
call such ``p`` a *cut*; two kinds are used, both decided by ``T[p-1]`` and
``T[p]`` alone:

1. ``T[p-1]`` is a letter (``\\p{L}``) and ``T[p]`` is not a letter, mark,
   ``'`` or unassigned. The piece holding ``T[p-1]`` is a letter piece (or
   cl100k's ``'s``-style contraction); every letter alternative consumes only
   letters and marks after its optional one-character prefix, and o200k's
   contraction suffix must start with ``'``, so that piece ends at ``p``. No
   alternative has a look-behind, so the pieces from ``p`` on depend on
   ``T[p:]`` only. The pieces before ``p`` read at most one character past
   their end (``\\p{L}++`` and the optional contraction look at ``T[p]``, a
   non-letter, non-``'``), which they treat as they treat the end of text.
2. ``T[p-1] == "\\n"`` and ``T[p]`` is a letter or decimal digit. No
   alternative continues a piece from a newline into a letter or digit (the
   letter alternatives' prefix excludes ``\\r\\n``; punctuation's trailing
   ``[\\r\\n]*`` / ``[\\r\\n/]*`` and the whitespace alternatives stop there).
   The whitespace run ending at ``p - 1`` ends in a newline, so
   ``\\s*[\\r\\n]`` (``\\s*[\\r\\n]+``) takes all of it followed by a letter as
   it does at the end of text, where cl100k's ``\\s++$`` takes the same run.

(a) holds when the text holds no special-token string at all: every special
of the supported encodings starts with ``<|`` (checked per encoding), and a
text that contains ``<|`` is encoded in full. A chunk's *core* runs from its first cut to its last one, both
inside the chunk text, so it is a cut-bounded stretch of every prompt that
holds the chunk: its tokens, offset by its position, are the prompt's tokens
there. The junctions (the text between cores: chunk edges, separators, pads,
template) are encoded whole on every call. Windows are thus whole
pre-tokenizer pieces, W = the distance from a chunk's edge to its first cut
(typically one word). The property test
``tests/unit/test_stitch_properties.py`` checks ``stitched == full`` on
adversarial boundaries (whitespace runs, combining marks, ZWJ emoji, digit
runs, CJK, contractions).

Byte-level Hugging Face tokenizers (DeepSeek-V4's ``tokenizer.json``) chain
several split regexes, a normalizer and added tokens; the argument has not
been made for them, so they are encoded in full and say so.
"""

from __future__ import annotations

import sys
import threading
from collections import OrderedDict
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
import regex

from phaseaware.tokenizers.base import CharIndexTokenizer, Tokenizer

__all__ = [
    "DEFAULT_CACHE_BYTES",
    "ChunkTokenCache",
    "TokenStarts",
    "default_cache",
    "windowed_support",
    "stitched_starts",
    "full_starts",
]

DEFAULT_CACHE_BYTES = 64 * 1024 * 1024

_CUT = regex.compile(r"(?<=\p{L})(?=[^\p{L}\p{M}'\p{Cn}])|(?<=\n)(?=[\p{L}\p{Nd}])")
_SPECIAL_MARK = "<|"  # every special-token string of the supported encodings starts so
_MIN_CORE = 16  # shorter cores are left in the junction (not worth a cache entry)


class ChunkTokenCache:
    """Thread-safe LRU of chunk-core token starts, keyed by (fingerprint, text), capped in bytes.

    ``max_bytes`` bounds the sum of each entry's size (its starts array plus
    its key text); the least recently used entries are evicted past it.
    """

    def __init__(self, max_bytes: int = DEFAULT_CACHE_BYTES) -> None:
        if isinstance(max_bytes, bool) or not isinstance(max_bytes, int) or max_bytes < 0:
            raise ValueError(f"max_bytes must be an int >= 0, got {max_bytes!r}")
        self.max_bytes = max_bytes
        self._entries: OrderedDict[tuple[str, str], tuple[np.ndarray, int]] = OrderedDict()
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

    def get(self, key: tuple[str, str]) -> np.ndarray | None:
        with self._lock:
            entry = self._entries.get(key)
            if entry is None:
                self.misses += 1
                return None
            self._entries.move_to_end(key)
            self.hits += 1
            return entry[0]

    def put(self, key: tuple[str, str], starts: np.ndarray) -> None:
        size = int(starts.nbytes) + sys.getsizeof(key[1]) + 64
        if size > self.max_bytes:
            return
        with self._lock:
            old = self._entries.pop(key, None)
            if old is not None:
                self._bytes -= old[1]
            self._entries[key] = (starts, size)
            self._bytes += size
            while self._bytes > self.max_bytes:
                _, (_, dropped) = self._entries.popitem(last=False)
                self._bytes -= dropped

    def clear(self) -> None:
        with self._lock:
            self._entries.clear()
            self._bytes = 0


_default = ChunkTokenCache()


def default_cache() -> ChunkTokenCache:
    """The process-wide cache ``assemble`` uses unless told otherwise (64 MiB cap)."""
    return _default


@dataclass(frozen=True, eq=False)
class TokenStarts:
    """Token char starts of a text (as ``TokenizedText``'s lookups), from a numpy array."""

    starts: np.ndarray
    text_length: int
    verification: str  # "windowed": stitched from cached chunks; "full": one encode

    def __len__(self) -> int:
        return int(self.starts.size)

    def token_at_char(self, char_offset: int) -> int:
        if not 0 <= char_offset < self.text_length:
            raise IndexError(f"char offset {char_offset} outside text of {self.text_length} chars")
        first = int(np.searchsorted(self.starts, char_offset, side="left"))
        if first < self.starts.size and self.starts[first] == char_offset:
            return first
        return first - 1

    def tokens_at_chars(self, chars: Sequence[int]) -> list[int]:
        """``[token_at_char(c) for c in chars]`` in one numpy pass."""
        if not len(chars):
            return []
        c = np.asarray(chars, dtype=np.int64)
        if int(c.min()) < 0 or int(c.max()) >= self.text_length:
            raise IndexError(f"char offsets outside text of {self.text_length} chars")
        first = np.searchsorted(self.starts, c, side="left")
        clipped = np.minimum(first, self.starts.size - 1)
        hit = (first < self.starts.size) & (self.starts[clipped] == c)
        out: list[int] = np.where(hit, first, first - 1).tolist()
        return out

    def token_span(self, char_start: int, char_end: int) -> tuple[int, int]:
        if not 0 <= char_start < char_end <= self.text_length:
            raise IndexError(
                f"char span [{char_start}, {char_end}) invalid for text of {self.text_length} chars"
            )
        end = int(np.searchsorted(self.starts, char_end - 1, side="right"))
        return self.token_at_char(char_start), end

    def tokens_in(self, start: int, end: int) -> int:
        """Tokens whose first character lies in ``[start, end)``."""
        left, right = np.searchsorted(self.starts, [start, end], side="left").tolist()
        return int(right - left)


def windowed_support(tokenizer: Tokenizer) -> str | None:
    """None when ``stitched_starts`` is sound for ``tokenizer``; else why it is not."""
    return _support_reason(tokenizer)


def _support_reason(tokenizer: Tokenizer) -> str | None:
    from phaseaware.tokenizers.tiktoken import (  # noqa: PLC0415 (same layer, lazy)
        CL100K_PATTERN,
        O200K_PATTERN,
        TiktokenTokenizer,
    )

    if not isinstance(tokenizer, TiktokenTokenizer):
        return "the windowed argument is made for tiktoken's regex pre-tokenizers only"
    if tokenizer.pattern not in (CL100K_PATTERN, O200K_PATTERN):
        return "unknown pre-tokenizer pattern"
    if not all(s.startswith(_SPECIAL_MARK) for s in tokenizer.encoding.special_tokens_set):
        return "a special-token string does not start with '<|'"
    return None


def full_starts(tokenizer: Tokenizer, text: str) -> TokenStarts:
    """One encode of ``text`` (``verification="full"``)."""
    if isinstance(tokenizer, CharIndexTokenizer):
        starts = np.asarray(tokenizer.char_index(text).starts, dtype=np.int64)
    else:
        starts = np.asarray(tokenizer.tokenize(text).starts, dtype=np.int64)
    return TokenStarts(starts=starts, text_length=len(text), verification="full")


def _core(text: str, start: int, end: int) -> tuple[int, int] | None:
    """[a, b) of ``text[start:end]``'s first and last cut strictly inside it; None if too short."""
    first = _CUT.search(text, start + 1, end)
    if first is None:
        return None
    a = b = first.start()
    for begin in (max(a, end - 64), a):  # the last cut: look near the end first
        for match in _CUT.finditer(text, begin, end):
            b = match.start()
        if b > a or begin == a:
            break
    return (a, b) if b - a >= _MIN_CORE else None


def stitched_starts(
    tokenizer: Tokenizer,
    text: str,
    spans: Sequence[tuple[int, int]],
    *,
    cache: ChunkTokenCache | None,
) -> TokenStarts:
    """``char_index(text).starts``, with the chunk texts at ``spans`` (ascending) cached.

    Falls back to one full encode when ``windowed_support`` names a reason or
    ``cache`` is None.
    """
    if cache is None or _SPECIAL_MARK in text or windowed_support(tokenizer) is not None:
        return full_starts(tokenizer, text)
    assert isinstance(tokenizer, CharIndexTokenizer)
    fp = tokenizer.fingerprint()
    parts: list[np.ndarray] = []
    pos = 0

    def encode(s: int, e: int) -> None:
        if e > s:
            parts.append(np.asarray(tokenizer.char_index(text[s:e]).starts) + s)

    for start, end in spans:
        core = _core(text, start, end)
        if core is None:
            continue
        a, b = core
        encode(pos, a)
        key = (fp, text[a:b])
        cached = cache.get(key)
        if cached is None:
            cached = np.asarray(tokenizer.char_index(key[1]).starts, dtype=np.int64)
            cache.put(key, cached)
        parts.append(cached + a)
        pos = b
    encode(pos, len(text))
    starts = np.concatenate(parts) if parts else np.zeros(0, dtype=np.int64)
    return TokenStarts(starts=starts, text_length=len(text), verification="windowed")
