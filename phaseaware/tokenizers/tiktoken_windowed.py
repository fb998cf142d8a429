"""Windowed re-tokenization for tiktoken's cl100k/o200k regex pre-tokenizers.

The cut rule is :data:`phaseaware.tokenizers.cuts.TIKTOKEN_CUTS`; the argument that it
is sound for these two patterns is in :mod:`phaseaware.assembly.retokenize.windowed`.
``TiktokenTokenizer.window_support`` / ``window_recipe`` delegate here.
"""

from __future__ import annotations

import itertools
from collections.abc import Callable, Collection, Sequence

import numpy as np

from phaseaware.errors import InputError
from phaseaware.tokenizers.windowing import MIN_CORE

__all__ = ["tiktoken_window_support", "ascii_fast_starts"]


def tiktoken_window_support(
    pattern: str, special_tokens: Collection[str], *, known_patterns: Collection[str]
) -> str | None:
    """None when the tiktoken cut rule is sound for ``pattern`` and ``special_tokens``."""
    if pattern not in known_patterns:
        return "unknown pre-tokenizer pattern"
    for special in special_tokens:
        middle = special[2:-2]
        if not (special[:2] == "<|" and special[-2:] == "|>" and "|" not in middle):
            return f"special token {special!r} is not of the form <|name|>"
        if len(middle) >= MIN_CORE:
            return f"special token {special!r} is longer than a core's minimum"
    return None


def ascii_fast_starts(
    text: str,
    encode: Callable[[str], Sequence[int]],
    byte_lengths: Sequence[int],
    slow: Callable[[str], np.ndarray],
) -> np.ndarray:
    """Token start characters of ``text`` without the fixed numpy cost on short ASCII
    texts (``slow``, the char index, for the rest): on ASCII one byte is one character."""
    if not text.isascii():
        return np.asarray(slow(text), dtype=np.int64)
    lengths = [byte_lengths[i] for i in encode(text)]
    if sum(lengths) != len(text):
        raise InputError("tiktoken did not round-trip the text; it cannot be tokenized exactly")
    return np.fromiter(
        itertools.accumulate(lengths[:-1], initial=0), dtype=np.int64, count=len(lengths)
    )
