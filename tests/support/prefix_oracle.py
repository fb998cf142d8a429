"""The oracle the shared-prefix tests compare against: how many leading tokens two texts'
full encodes share, and the tokenizers they use (loaded once per spec)."""

from __future__ import annotations

from functools import cache

import pytest

from phaseaware.tokenizers import load_tokenizer
from phaseaware.tokenizers.base import Tokenizer


@cache
def tok(spec: str) -> Tokenizer:
    """The tokenizer of ``spec``, loaded once (DeepSeek-V4 skips without transformers)."""
    if spec == "deepseek-v4":
        pytest.importorskip("transformers")
    return load_tokenizer(spec)


def oracle(t: Tokenizer, a: str, b: str) -> int:
    """The number of leading tokens the full encodes of ``a`` and ``b`` share."""
    x, y = t.encode(a), t.encode(b)
    n = 0
    while n < min(len(x), len(y)) and x[n] == y[n]:
        n += 1
    return n
