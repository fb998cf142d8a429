"""Per-token character start offsets from per-token byte lengths.

Every adapter reduces its tokens to the exact UTF-8 bytes each one stands for;
the byte offset of a token is then a cumulative sum, and its character offset
is the index of the character that contains that byte. This is exact for any
byte-level tokenizer (tiktoken, GPT-2 style BPE) and needs no per-tokenizer
offset quirks (leading spaces, characters split across tokens, special tokens).
"""

from __future__ import annotations

import itertools
from collections.abc import Sequence
from dataclasses import dataclass, field

import numpy as np

from phaseaware.errors import InputError

__all__ = [
    "utf8_bytes",
    "char_starts",
    "char_starts_array",
    "split_starts",
    "TokenStarts",
    "CharIndex",
]


def utf8_bytes(text: str) -> bytes:
    """UTF-8 bytes of ``text``; :class:`InputError` if it holds lone surrogates."""
    try:
        return text.encode("utf-8")
    except UnicodeEncodeError as exc:
        raise InputError(
            f"text holds a lone surrogate at char {exc.start} ({text[exc.start]!r}), which no "
            "tokenizer can encode losslessly; clean the text (e.g. "
            "text.encode('utf-8', 'replace').decode()) before passing it"
        ) from None


def char_starts(
    text_bytes: bytes, token_byte_lengths: np.ndarray | Sequence[int]
) -> tuple[int, ...]:
    """Character index where each token starts.

    ``token_byte_lengths[i]`` is the number of UTF-8 bytes token ``i`` stands for;
    the lengths must sum to ``len(text_bytes)`` (callers verify the bytes match).
    A token that starts inside a multi-byte character starts at that character.
    Runs in O(bytes + tokens log bytes) with numpy; no Python loop over tokens.
    """
    return tuple(char_starts_array(text_bytes, token_byte_lengths).tolist())


def char_starts_array(
    text_bytes: bytes, token_byte_lengths: np.ndarray | Sequence[int]
) -> np.ndarray:
    """``char_starts`` as an int64 array (no conversion to Python ints)."""
    lengths = np.asarray(token_byte_lengths, dtype=np.int64)
    if lengths.size == 0:
        return np.zeros(0, dtype=np.int64)
    byte_starts = np.empty_like(lengths)
    byte_starts[0] = 0
    np.cumsum(lengths[:-1], out=byte_starts[1:])
    if text_bytes.isascii():  # char index == byte index (C-speed check)
        return byte_starts
    raw = np.frombuffer(text_bytes, dtype=np.uint8)
    continuation = np.flatnonzero((raw & 0xC0) == 0x80)  # bytes that do not start a char
    if continuation.size == 0:  # ASCII-like: char index == byte index
        return byte_starts
    # char of byte b = b - (continuation bytes before b) - (1 if b itself continues a char)
    before = np.searchsorted(continuation, byte_starts)
    inside = continuation[np.minimum(before, continuation.size - 1)] == byte_starts
    starts: np.ndarray = byte_starts - before - inside
    return starts


def split_starts(
    texts: Sequence[str],
    texts_bytes: Sequence[bytes],
    token_byte_lengths: np.ndarray,
    counts: Sequence[int],
) -> list[tuple[int, ...]] | None:
    """Per-text char starts for many texts from ONE vectorized pass over their concatenation.

    ``token_byte_lengths`` holds the byte lengths of all tokens, text after text;
    ``counts[k]`` tokens belong to text ``k``. None when the tokens of some text
    do not cover exactly its bytes (the caller then falls back per text).
    """
    arrays = split_start_arrays(texts, texts_bytes, token_byte_lengths, counts)
    return None if arrays is None else [tuple(a.tolist()) for a in arrays]


def split_start_arrays(
    texts: Sequence[str],
    texts_bytes: Sequence[bytes],
    token_byte_lengths: np.ndarray,
    counts: Sequence[int],
) -> list[np.ndarray] | None:
    """``split_starts`` as one int64 array per text (no tuples; each a view of one array)."""
    if not texts:
        return []
    lengths = np.asarray(token_byte_lengths, dtype=np.int64)
    if len(texts) == 1:  # one text: its tokens must cover exactly its bytes
        if int(lengths.sum()) != len(texts_bytes[0]):
            return None
        return [char_starts_array(texts_bytes[0], lengths)]
    bounds = list(itertools.accumulate(counts, initial=0))
    covered = np.zeros(lengths.size + 1, dtype=np.int64)  # bytes of the first i tokens
    np.cumsum(lengths, out=covered[1:])
    # the tokens of texts 0..k cover exactly their bytes, for every k
    if covered[bounds[1:]].tolist() != list(itertools.accumulate(map(len, texts_bytes))):
        return None
    starts = char_starts_array(b"".join(texts_bytes), lengths)
    char_base = list(itertools.accumulate(map(len, texts[:-1]), initial=0))
    starts -= np.repeat(np.asarray(char_base, dtype=np.int64), counts)
    return [starts[lo:hi] for lo, hi in itertools.pairwise(bounds)]


@dataclass(frozen=True, eq=False)
class TokenStarts:
    """Token char starts of a text and ``TokenizedText``'s lookups, over a numpy array.

    THE token-starts type: tokenizers return it from ``char_index`` (one encode,
    ``verification="full"``) and windowed re-tokenization builds it from cached chunk
    cores (``"windowed"``). No tuples of ids are built; ``starts`` is
    ``char_starts_array`` of the text. Lookups equal ``TokenizedText``'s.
    """

    starts: np.ndarray
    text_length: int
    verification: str = "full"  # "windowed": stitched from cached chunks; "full": one encode
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


#: The former name of :class:`TokenStarts` (same type).
CharIndex = TokenStarts
