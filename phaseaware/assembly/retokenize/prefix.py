"""Sent prompts' verified tokenizations, and where a continuation may be re-encoded alone.

Agent loops send a conversation that grows by one message per step. The text
sent at step ``n`` is a prefix of every later prompt, so its tokens need not
be computed again: :class:`PrefixTokenCache` keeps the verified token starts of
each prompt sent (keyed by the tokenizer's fingerprint and the exact text), and
:func:`prefix_cut` finds a position ``p`` near the end of such a text ``P``
where, for EVERY text ``T`` that starts with ``P``, the tokens of ``T`` are the
tokens of ``P[:p]`` followed by those of ``T[p:]`` (shifted by ``p``). Only
``T[p:]`` (the end of ``P``, the reply and the new message) is then encoded.

Soundness is the windowed argument of :mod:`.windowed` (tiktoken's cl100k/o200k
patterns) and :mod:`.windowed_hf` (DeepSeek-V4's Hugging Face config): ``p`` is
a *cut* decided by the pair ``T[p-1], T[p]``; both characters lie inside ``P``
(``p < len(P)``), so the pair, and with it the cut, is the same in every
continuation. Special tokens: the Hugging Face rule bans every pair that an
added token holds (no added token crosses a cut); for tiktoken every special
token is ``<|name|>`` with ``len(name) < 16`` (checked by ``windowed_support``),
so one crossing ``p`` would put a ``|`` within :data:`SPECIAL_REACH` characters
of ``p``; ``p`` is taken only where ``P`` holds none there and the whole reach
lies inside ``P``. Any other tokenizer has no cut (``prefix_cut`` returns the
reason) and the caller encodes in full.

:func:`shared_tokens` counts the leading token ids two texts share (what a
server's prefix cache reuses) the same way: the tokens before the last cut
before the point where the texts part are counted from the text's known token
starts, and only the characters from that cut to a cut past the parting point
are encoded, in each text (the start of a text is always a cut). The oracle
(encode both texts in full, count equal leading ids) lives in the tests.
"""

from __future__ import annotations

import contextlib
import sys
import weakref
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from phaseaware.assembly.retokenize.windowed import _family, windowed_support
from phaseaware.caches import BoundedCache
from phaseaware.tokenizers.base import Tokenizer

__all__ = [
    "SPECIAL_REACH",
    "PrefixEntry",
    "PrefixTokenCache",
    "common_prefix_chars",
    "common_prefix_ids",
    "default_prefix_cache",
    "prefix_cut",
    "shared_tokens",
]

SPECIAL_REACH = 20  # tiktoken: "<|" + name (< 16) + "|>" spans fewer characters
_SEARCH_CHARS = 1 << 16  # a cut is searched in the last 64K characters of the prefix only

_WINDOWS = (256, 4096, 65536)  # chars past the parting point searched for a cut

DEFAULT_PREFIX_ENTRIES = 16
DEFAULT_PREFIX_BYTES = 64 * 1024 * 1024


@dataclass(frozen=True, eq=False)
class PrefixEntry:
    """The exact ``text`` of a prompt sent and the char start of each of its tokens."""

    text: str
    starts: np.ndarray  # int32 or int64, ascending; len = the prompt's token count

    @property
    def nbytes(self) -> int:
        return int(self.starts.nbytes) + sys.getsizeof(self.text) + 120

    def tokens_before(self, p: int) -> int:
        """How many tokens start before character ``p``."""
        return int(np.searchsorted(self.starts, p, side="left"))


def _entry_bytes(key: tuple[str, str], entry: PrefixEntry) -> int:
    return entry.nbytes


class PrefixTokenCache:
    """Thread-safe LRU of sent prompts' token starts, capped in entries AND bytes.

    ``longest_prefix_of(text)`` returns the longest cached prompt that ``text``
    starts with (a linear scan over at most ``max_entries`` entries, each a
    C-level ``startswith``). ``max_entries=0`` or ``max_bytes=0`` disables it.
    The entries live in a ``caches.BoundedCache`` keyed by (fingerprint, text).
    """

    def __init__(
        self,
        *,
        max_entries: int = DEFAULT_PREFIX_ENTRIES,
        max_bytes: int = DEFAULT_PREFIX_BYTES,
        name: str | None = None,
    ) -> None:
        self._lru: BoundedCache[tuple[str, str], PrefixEntry] = BoundedCache(
            max_entries=max_entries, max_bytes=max_bytes, size_of=_entry_bytes, name=name
        )
        self.max_entries = max_entries
        self.max_bytes = max_bytes

    @property
    def nbytes(self) -> int:
        """Bytes the entries hold now (always <= ``max_bytes``)."""
        return self._lru.nbytes

    @property
    def hits(self) -> int:
        return self._lru.hits

    @property
    def misses(self) -> int:
        return self._lru.misses

    def __len__(self) -> int:
        return len(self._lru)

    def longest_prefix_of(self, fingerprint: str, text: str) -> PrefixEntry | None:
        """The longest cached prompt of this tokenizer that ``text`` starts with."""
        # longest first; a cheap look at the last characters before the full compare,
        # so a hit costs one C-level startswith of the prompt it returns
        ranked = sorted(
            (
                k
                for k in self._lru.snapshot_keys()
                if k[0] == fingerprint and len(k[1]) <= len(text)
            ),
            key=lambda k: len(k[1]),
            reverse=True,
        )
        for key in ranked:
            n = len(key[1])
            if text[max(0, n - 64) : n] == key[1][-64:] and text.startswith(key[1]):
                found = self._lru.get(key)  # a hit (None only if evicted meanwhile)
                if found is not None:
                    return found
        self._lru.misses += 1
        return None

    def put(self, fingerprint: str, entry: PrefixEntry) -> None:
        if entry.starts.ndim != 1 or (
            entry.starts.size and int(entry.starts[-1]) >= len(entry.text)
        ):
            raise ValueError("starts must be the ascending char starts of the entry's text")
        self._lru.put((fingerprint, entry.text), entry)

    def clear(self) -> None:
        self._lru.clear()


_default = PrefixTokenCache(name="assembly.sent_prompts")


def default_prefix_cache() -> PrefixTokenCache:
    """The process-wide cache ``assemble_append`` uses unless told otherwise (16 prompts, 64 MiB)."""
    return _default


def prefix_cut(tokenizer: Tokenizer, text: str) -> tuple[int | None, str]:
    """``(p, "")``: the last cut of ``text`` sound for every continuation; ``(None, why)``.

    ``p < len(text)``; the tokens of any ``T`` starting with ``text`` are those of
    ``text[:p]`` followed by those of ``T[p:]`` (module docstring).
    """
    family = _family(tokenizer)
    if family is None:
        return None, f"no proven cut for {tokenizer.spec}: {windowed_support(tokenizer)}"
    end = len(text) - SPECIAL_REACH if family.bar_specials else len(text)
    floor = max(0, end - _SEARCH_CHARS)
    while end > floor:
        found = family.cuts.backward.search(text, floor, end)
        if found is None:
            break
        p = found.start()
        end = p
        if p <= 0 or text[p - 1 : p + 1] in family.cuts.banned:
            continue
        if family.bar_specials and "|" in text[max(0, p - SPECIAL_REACH) : p + SPECIAL_REACH]:
            continue
        return p, ""
    return None, f"no cut in the last {_SEARCH_CHARS} characters of the sent text"


def common_prefix_ids(a: Sequence[int], b: Sequence[int]) -> int:
    """Length of the longest common prefix of two id sequences (vectorised)."""
    n = min(len(a), len(b))
    if n == 0:
        return 0
    diff = np.flatnonzero(np.asarray(a[:n], dtype=np.int64) != np.asarray(b[:n], dtype=np.int64))
    return int(diff[0]) if diff.size else n


def common_prefix_chars(a: str, b: str) -> int:
    """Length of the longest common prefix of two strings (C-level compares, O(n log n))."""
    lo, hi = 0, min(len(a), len(b))
    if a[:hi] == b[:hi]:
        return hi
    while lo < hi:  # a[:lo] == b[:lo] and a[:hi] != b[:hi]
        mid = (lo + hi + 1) // 2
        if a[:mid] == b[:mid]:
            lo = mid
        else:
            hi = mid - 1
    return lo


def shared_tokens(
    tokenizer: Tokenizer,
    text: str,
    others: Sequence[str],
    *,
    starts: np.ndarray | None = None,
) -> list[int]:
    """For each of ``others``: the longest common prefix of ``tokenizer.encode(text)``
    and ``tokenizer.encode(other)`` (token ids).

    ``starts``: the char start of each token of ``text`` (its verified
    tokenization), if known: the tokens before the cut are then counted, not
    encoded. Exact for every tokenizer: with a proven cut ``p`` in the shared text
    (0 where none is found), both encodings are the tokens of ``text[:p]``
    followed by those of the rest; ids can agree only on tokens that end at or
    before the parting point (a token crossing it holds differing characters), so
    each text's tokens from ``p`` up to a cut past that point hold every
    candidate. Without a cut rule, both texts are encoded in full.
    """
    counts = []
    for other in others:
        shared = common_prefix_chars(text, other)
        if shared == len(text) == len(other):
            counts.append(len(starts) if starts is not None else len(tokenizer.encode(text)))
            continue
        p = (prefix_cut(tokenizer, text[:shared])[0] if shared > 1 else None) or 0
        if p == 0:
            head = 0
        elif starts is not None:  # p is a cut of text: a token starts there
            head = int(np.searchsorted(starts, p, side="left"))
        else:
            head = len(tokenizer.encode(text[:p]))
        mine = _ids_through(tokenizer, text, start=p, shared=shared)
        theirs = _ids_through(tokenizer, other, start=p, shared=shared)
        counts.append(head + common_prefix_ids(mine, theirs))
    return counts


def _ids_through(tokenizer: Tokenizer, text: str, *, start: int, shared: int) -> list[int]:
    """Ids of ``text`` from char ``start`` (a cut) through the token holding ``shared``."""
    if shared >= len(text):
        return tokenizer.encode(text[start:])
    for window in _WINDOWS:
        end = shared + window
        if end >= len(text):
            break
        q, _ = prefix_cut(tokenizer, text[:end])  # a tokenizer without a rule: None at once
        if q is not None and q > shared:
            return _cut_ids(tokenizer, text[start:q])
    return tokenizer.encode(text[start:])


# the encodes between two cuts, kept: a warm call measures the same stretch (up to
# MAX_CUT_CHARS characters) again; an entry is used only while its weak reference still
# reaches the same tokenizer object (``encode`` is pure: a kept entry equals a fresh one)
MAX_CUT_CHARS = 4096
_CUT_IDS: BoundedCache[tuple[int, str], tuple[weakref.ref[Tokenizer], tuple[int, ...]]] = (
    BoundedCache(
        max_entries=256,
        name="assembly.prefix_cut_encodes",
        bound=f"LRU, 256 entries of texts up to {MAX_CUT_CHARS} characters",
    )
)


def _cut_ids(tokenizer: Tokenizer, piece: str) -> list[int]:
    """``tokenizer.encode(piece)``, kept for short pieces (a new list each call)."""
    key = (id(tokenizer), piece)
    known = _CUT_IDS.get(key)
    if known is not None and known[0]() is tokenizer:
        return list(known[1])
    ids = tokenizer.encode(piece)
    if len(piece) <= MAX_CUT_CHARS:
        with contextlib.suppress(TypeError):  # a tokenizer without weak references: not kept
            _CUT_IDS.put(key, (weakref.ref(tokenizer), tuple(ids)))
    return ids
