"""Per-token character start offsets from per-token byte lengths.

Every adapter reduces its tokens to the exact UTF-8 bytes each one stands for;
the byte offset of a token is then a cumulative sum, and its character offset
is the index of the character that contains that byte. This is exact for any
byte-level tokenizer (tiktoken, GPT-2 style BPE) and needs no per-tokenizer
offset quirks (leading spaces, characters split across tokens, special tokens).
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from phaseaware.errors import InputError

__all__ = ["utf8_bytes", "char_starts"]


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
    Runs in O(bytes) with numpy; no Python loop over tokens.
    """
    lengths = np.asarray(token_byte_lengths, dtype=np.int64)
    if lengths.size == 0:
        return ()
    byte_starts = np.empty_like(lengths)
    byte_starts[0] = 0
    np.cumsum(lengths[:-1], out=byte_starts[1:])
    raw = np.frombuffer(text_bytes, dtype=np.uint8)
    is_char_start = (raw & 0xC0) != 0x80
    # char index of every byte, plus one past the end for zero-length trailing tokens
    char_of_byte = np.empty(raw.size + 1, dtype=np.int64)
    np.cumsum(is_char_start, out=char_of_byte[:-1])
    char_of_byte[:-1] -= 1
    char_of_byte[-1] = char_of_byte[-2] + 1 if raw.size else 0
    return tuple(char_of_byte[byte_starts].tolist())
