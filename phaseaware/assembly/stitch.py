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

(a): every special token of the supported encodings is ``<|name|>`` with no
``|`` in ``name`` and ``len(name) < 16`` (checked per encoding), and only a
chunk without ``|`` gets a core, of at least 16 characters. An occurrence
meeting a core then either holds one of its ``|`` inside the chunk (there is
none), or lies inside the chunk's core (its ``name`` would hold the whole
core: too short), or has ``<`` or ``>`` next to a cut, whose sides are a
letter or newline. Occurrences in the junctions (the chat template's) are
found there exactly as in the whole text: none crosses a core edge. A chunk's *core* runs from its first cut to its last one, both
inside the chunk text, so it is a cut-bounded stretch of every prompt that
holds the chunk: its tokens, offset by its position, are the prompt's tokens
there. The junctions (the text between cores: chunk edges, separators, pads,
template) are encoded whole on every call. Windows are thus whole
pre-tokenizer pieces, W = the distance from a chunk's edge to its first cut
(typically one word). The property test
``tests/unit/test_stitch_properties.py`` checks ``stitched == full`` on
adversarial boundaries (whitespace runs, combining marks, ZWJ emoji, digit
runs, CJK, contractions).

Byte-level Hugging Face tokenizers: DeepSeek-V4's ``tokenizer.json`` config
(three split regexes, no normalizer, added tokens) has its own cut rule and
argument in ``stitch_hf``; there no chunk needs to avoid ``|`` and the
junctions are one encode. Any other configuration is encoded in full and
says why (``windowed_support``). Cuts are found by ``cuts.CutRule``: a chunk's
first and last cut are one forward and one backward regex search.
"""

from __future__ import annotations

import functools
import itertools
import sys
import threading
from collections import OrderedDict
from collections.abc import Sequence
from dataclasses import dataclass, field

import numpy as np

from phaseaware.assembly.cuts import TIKTOKEN_CUTS, CutRule
from phaseaware.assembly.joined import (
    Encode,
    joined_starts,
    junction_starts,
    starts_of,
    unique_junction_starts,
)
from phaseaware.assembly.stitch_hf import hf_starts, hf_support
from phaseaware.tokenizers.base import BatchTokenizer, CharIndexTokenizer, Tokenizer
from phaseaware.tokenizers.hf import HFTokenizer
from phaseaware.tokenizers.tiktoken import CL100K_PATTERN, O200K_PATTERN, TiktokenTokenizer

__all__ = [
    "DEFAULT_CACHE_BYTES",
    "ChunkTokenCache",
    "TokenStarts",
    "default_cache",
    "windowed_support",
    "stitched_starts",
    "cached_pieces",
    "seed_cores",
    "full_starts",
]

DEFAULT_CACHE_BYTES = 64 * 1024 * 1024

_MIN_CORE = 16  # shorter cores are left in the junction (not worth a cache entry)


class ChunkTokenCache:
    """Thread-safe LRU of chunk token starts (its core), keyed by (fingerprint, chunk text), byte-capped.

    ``max_bytes`` bounds the sum of each entry's size (its starts array plus
    its key text); the least recently used entries are evicted past it.
    """

    def __init__(self, max_bytes: int = DEFAULT_CACHE_BYTES) -> None:
        if isinstance(max_bytes, bool) or not isinstance(max_bytes, int) or max_bytes < 0:
            raise ValueError(f"max_bytes must be an int >= 0, got {max_bytes!r}")
        self.max_bytes = max_bytes
        self._entries: OrderedDict[tuple[str, str], tuple[_Entry, int]] = OrderedDict()
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

    def get(self, key: tuple[str, str]) -> _Entry | None:
        with self._lock:
            entry = self._entries.get(key)
            if entry is None:
                self.misses += 1
                return None
            self._entries.move_to_end(key)
            self.hits += 1
            return entry[0]

    def put(self, key: tuple[str, str], entry: _Entry) -> None:
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


def default_cache() -> ChunkTokenCache:
    """The process-wide cache ``assemble`` uses unless told otherwise (64 MiB cap)."""
    return _default


@dataclass(frozen=True, eq=False)
class TokenStarts:
    """Token char starts of a text (as ``TokenizedText``'s lookups), from a numpy array."""

    starts: np.ndarray
    text_length: int
    verification: str  # "windowed": stitched from cached chunks; "full": one encode
    _at: dict[int, int] = field(default_factory=dict, repr=False)  # prefetched lookups
    _right: dict[int, int] = field(default_factory=dict, repr=False)

    def __len__(self) -> int:
        return int(self.starts.size)

    def prefetch(self, chars: Sequence[int], span_ends: Sequence[int]) -> None:
        """Look up ``token_at_char`` of ``chars`` and ``token_span`` ends in one pass each."""
        self._at.update(zip(chars, self.tokens_at_chars(chars), strict=True))
        if len(span_ends):
            found = np.searchsorted(self.starts, np.asarray(span_ends) - 1, side="right")
            self._right.update(zip(span_ends, found.tolist(), strict=True))

    def token_at_char(self, char_offset: int) -> int:
        known = self._at.get(char_offset)
        if known is not None:
            return known
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
        if self._at and all(c in self._at for c in chars):
            return [self._at[c] for c in chars]
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
        end = self._right.get(char_end)
        if end is None:
            end = int(np.searchsorted(self.starts, char_end - 1, side="right"))
        return self.token_at_char(char_start), end

    def tokens_in(self, start: int, end: int) -> int:
        """Tokens whose first character lies in ``[start, end)``."""
        left, right = np.searchsorted(self.starts, [start, end], side="left").tolist()
        return int(right - left)


def windowed_support(tokenizer: Tokenizer) -> str | None:
    """None when ``stitched_starts`` is sound for ``tokenizer``; else why it is not."""
    if isinstance(tokenizer, HFTokenizer):
        return hf_support(tokenizer)[0]
    return _support_reason(tokenizer)


@dataclass(frozen=True, eq=False)
class _Family:
    """How to stitch one tokenizer: its cuts, its one-text encode, and its special-token rule."""

    cuts: CutRule
    encode: Encode
    bar_specials: bool  # tiktoken: chunks with "|" get no core; junction joins split near "|"


def _family(tokenizer: Tokenizer) -> _Family | None:
    """The stitching recipe of ``tokenizer``; None where ``windowed_support`` names a reason."""
    if isinstance(tokenizer, HFTokenizer):
        rule = hf_support(tokenizer)[1]
        if rule is None:
            return None
        return _Family(rule, functools.partial(hf_starts, tokenizer), bar_specials=False)
    if _support_reason(tokenizer) is not None:
        return None
    assert isinstance(tokenizer, TiktokenTokenizer)
    return _Family(TIKTOKEN_CUTS, functools.partial(starts_of, tokenizer), bar_specials=True)


def _support_reason(tokenizer: Tokenizer) -> str | None:
    if not isinstance(tokenizer, TiktokenTokenizer):
        return (
            "the windowed argument is made for tiktoken's regex pre-tokenizers and "
            "DeepSeek-V4's Hugging Face config only"
        )
    if tokenizer.pattern not in (CL100K_PATTERN, O200K_PATTERN):
        return "unknown pre-tokenizer pattern"
    for special in tokenizer.encoding.special_tokens_set:
        middle = special[2:-2]
        if not (special[:2] == "<|" and special[-2:] == "|>" and "|" not in middle):
            return f"special token {special!r} is not of the form <|name|>"
        if len(middle) >= _MIN_CORE:
            return f"special token {special!r} is longer than a core's minimum"
    return None


def cached_pieces(
    tokenizer: BatchTokenizer,
    texts: Sequence[str],
    cache: ChunkTokenCache,
    *,
    fingerprint: str,
    chunks: Sequence[str] | None = None,
    offset: int = 0,
) -> list[TokenStarts]:
    """``tokenize_batch(texts)`` as token starts, each text's looked up in ``cache`` first.

    With ``chunks`` (``texts[k]`` holds ``chunks[k]`` at ``offset``), the fresh
    encodes also cache the chunks' cores (``seed_cores``) for ``stitched_starts``.
    """
    fp = fingerprint + "/piece"
    entries = [cache.get((fp, t)) for t in texts]
    missing = [k for k, e in enumerate(entries) if e is None]
    if missing:
        fresh = tokenizer.tokenize_batch([texts[k] for k in missing])
        for k, piece in zip(missing, fresh, strict=True):
            entry = _Entry(0, 0, np.asarray(piece.starts, dtype=np.int64))
            cache.put((fp, texts[k]), entry)
            entries[k] = entry
        if chunks is not None and isinstance(tokenizer, Tokenizer):
            seed = [entries[k] for k in missing]
            seed_cores(
                tokenizer,
                [texts[k] for k in missing],
                [chunks[k] for k in missing],
                [e.starts for e in seed if e is not None and e.starts is not None],
                offset,
                cache,
            )
    out = []
    for text, got in zip(texts, entries, strict=True):
        assert got is not None and got.starts is not None
        out.append(TokenStarts(starts=got.starts, text_length=len(text), verification="full"))
    return out


def full_starts(tokenizer: Tokenizer, text: str) -> TokenStarts:
    """One encode of ``text`` (``verification="full"``)."""
    if isinstance(tokenizer, CharIndexTokenizer):
        starts = np.asarray(tokenizer.char_index(text).starts, dtype=np.int64)
    else:
        starts = np.asarray(tokenizer.tokenize(text).starts, dtype=np.int64)
    return TokenStarts(starts=starts, text_length=len(text), verification="full")


@dataclass(frozen=True, eq=False)
class _Entry:
    """A chunk's core ``[a, b)`` (chunk-relative) and its token starts; None: no core."""

    a: int
    b: int
    starts: np.ndarray | None
    head: np.ndarray | None = None  # tokens of [0, a) alone, where known (``seed_cores``)
    tail: np.ndarray | None = None  # tokens of [b, len) alone, where known

    @property
    def nbytes(self) -> int:
        arrays = (self.starts, self.head, self.tail)
        return 80 + sum(int(x.nbytes) + 16 for x in arrays if x is not None)


def _entries(family: _Family, chunks: Sequence[str]) -> list[_Entry]:
    """Each chunk's ``_Entry``; the cores are encoded in one call, joined by stand-ins.

    Between cores i and i + 1 stands ``chunk_i[b_i] + chunk_{i+1}[a_{i+1} - 1]``,
    so each seam is an original cut pair; for tiktoken no core or stand-in holds
    ``|`` (see ``joined.junction_starts``), so no special token occurs in the
    joined text; for DeepSeek-V4 see ``stitch_hf`` (joins).
    """
    found = [_core(family, c) for c in chunks]
    cored = [(c, ab) for c, ab in zip(chunks, found, strict=True) if ab is not None]
    pieces = [c[a:b] for c, (a, b) in cored]
    seams = [c0[b0] + c1[a1 - 1] for (c0, (_, b0)), (c1, (a1, _)) in itertools.pairwise(cored)]
    encoded = iter(joined_starts(family.encode, pieces, seams) if pieces else [])
    return [
        _Entry(ab[0], ab[1], next(encoded) + ab[0]) if ab is not None else _Entry(0, 0, None)
        for ab in found
    ]


def _core(family: _Family, text: str) -> tuple[int, int] | None:
    """[a, b) of ``text``'s first and last cut strictly inside it; None if too short."""
    if family.bar_specials and "|" in text:
        return None
    return family.cuts.core(text, 0, len(text), _MIN_CORE)


def seed_cores(
    tokenizer: Tokenizer,
    texts: Sequence[str],
    chunks: Sequence[str],
    pieces: Sequence[np.ndarray],
    offset: int,
    cache: ChunkTokenCache,
) -> None:
    """Cache each chunk's core from a full encode of a text holding it at ``offset``.

    ``pieces[k]`` are the token starts of ``texts[k]``, which holds ``chunks[k]``
    at ``[offset, offset + len)``. The chunk's cuts are cuts there too (both
    characters of each lie in the chunk), so the tokens starting inside the
    core are the core's own: the same entry ``_entries`` would encode. Where the
    chunk's first (last) character also makes a cut pair with the text's
    character before (after) it, the tokens of the head ``[0, a)`` (tail
    ``[b, len)``) are those of that stretch alone, and are kept for
    ``stitched_starts`` to use wherever the prompt has a cut there too
    (Hugging Face families only).
    """
    family = _family(tokenizer)
    if family is None:
        return
    fp = tokenizer.fingerprint()
    at_cut = family.cuts.at
    for text, chunk, starts in zip(texts, chunks, pieces, strict=True):
        key = (fp, chunk)
        if cache.peek(key):
            continue
        ab = _core(family, chunk)
        if ab is None:
            cache.put(key, _Entry(0, 0, None))
            continue
        end = offset + len(chunk)
        bounds = [offset, offset + ab[0], offset + ab[1], end]
        lo, a, b, hi = np.searchsorted(starts, bounds).tolist()
        head = tail = None
        if not family.bar_specials:
            if at_cut(text, offset):
                head = starts[lo:a] - offset
            if at_cut(text, end):
                tail = starts[b:hi] - offset
        cache.put(key, _Entry(ab[0], ab[1], starts[a:b] - offset, head, tail))


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
    family = None if cache is None else _family(tokenizer)
    if cache is None or family is None:
        return full_starts(tokenizer, text)
    fp = tokenizer.fingerprint()
    keys = [(fp, text[start:end]) for start, end in spans]
    entries: list[_Entry | None] = []
    missing: dict[tuple[str, str], int] = {}  # new keys -> first index; repeats look up after
    for n, key in enumerate(keys):
        entries.append(None if key in missing else cache.get(key))
        if entries[-1] is None:
            missing.setdefault(key, n)
    fresh = dict(zip(missing, _entries(family, [k[1] for k in missing]), strict=True))
    for key, entry in fresh.items():
        cache.put(key, entry)
        entries[missing[key]] = entry
    for n, key in enumerate(keys):
        if entries[n] is None:  # a repeat (counted as a hit); the entry if the cap dropped it
            entries[n] = cache.get(key) or fresh[key]
    cores: list[tuple[int, int, np.ndarray]] = []  # (a, b, starts) absolute
    at_cut = family.cuts.at
    for (start, end), got in zip(spans, entries, strict=True):
        assert got is not None
        if got.starts is None:
            continue
        a, b, parts = start + got.a, start + got.b, [got.starts]
        if got.head is not None and at_cut(text, start):
            a, parts = start, [got.head, got.starts]  # the prompt cuts at the chunk start
        if got.tail is not None and at_cut(text, end):
            b, parts = end, [*parts, got.tail]  # ... and at its end
        core = np.concatenate(parts) if len(parts) > 1 else parts[0]
        cores.append((a, b, core + start))
    if family.bar_specials:
        junctions = junction_starts(family.encode, text, cores, bar_specials=True)
    else:
        junctions = unique_junction_starts(family.encode, text, cores)
    parts: list[np.ndarray] = []
    for (_, _, core_starts), junction in zip(cores, junctions, strict=False):
        parts.append(junction)
        parts.append(core_starts)
    parts.append(junctions[-1])
    starts = np.concatenate(parts) if parts else np.zeros(0, dtype=np.int64)
    return TokenStarts(starts=starts, text_length=len(text), verification="windowed")
