"""Windowed verification (``assembly.stitch``) equals a full re-tokenization, always.

Adversarial chunk boundaries: whitespace runs, combining marks, ZWJ emoji,
digit runs, CJK, contractions, special-token look-alikes. 2,000 cases per
tiktoken encoding, each checked cold (cache empty for the text) and warm.
"""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from phaseaware.assembly.stitch import (
    ChunkTokenCache,
    full_starts,
    stitched_starts,
    windowed_support,
)
from phaseaware.tokenizers import load_tokenizer

ATOMS = [
    # letters, case changes, contractions
    "word", "Word", "HTML", "aB", "x", "'s", "'S", "'ll", "'ve", "’s", "don't", "I'M",
    # whitespace runs
    " ", "  ", "   ", "\t", "\n", "\n\n", " \n ", "\r\n", "\u00a0", "\u3000", "\n \n",
    # combining marks, ZWJ emoji, modifiers
    "e\u0301", "\u0301", "a\u0308\u0304", "👩\u200d👩\u200d👧", "👍🏽", "\u200d", "🏳️\u200d🌈",
    # digit runs
    "1", "12", "12345", "٣٤٥", "3.14", "1,000",
    # CJK and its punctuation
    "中文", "日本語のテキスト", "。", "，", "한국어",
    # punctuation, slashes, template look-alikes
    ".", "(", ")", "/", "//", "<", ">", "|", "<|endoftext|>", "<|im_start|>", "->", "...", "'",
]  # fmt: skip
SEPARATORS = ["\n\n", " ", "", "\n", " . . .\n", "\n\n · ·\n", "\t"]

atom_text = st.lists(st.sampled_from(ATOMS), min_size=1, max_size=14).map("".join)
documents = st.tuples(
    st.sampled_from(["", "<|im_start|>user\n", "Context:\n", "x"]),
    st.lists(st.tuples(st.sampled_from(SEPARATORS), atom_text), min_size=1, max_size=5),
    st.sampled_from(["", "\n\n", "<|im_end|>\n", " end", "Question?"]),
)

_CACHES: dict[str, ChunkTokenCache] = {}


@pytest.fixture(scope="module", params=["tiktoken:cl100k_base", "tiktoken:o200k_base"])
def tiktoken_tokenizer(request):
    tok = load_tokenizer(request.param)
    tok.fingerprint()
    return tok


def _layout(doc):
    prefix, parts, suffix = doc
    text, spans = prefix, []
    for sep, chunk in parts:
        text += sep
        spans.append((len(text), len(text) + len(chunk)))
        text += chunk
    return text + suffix, spans


@settings(
    max_examples=2000,
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)
@given(doc=documents)
def test_windowed_equals_full_tokenization(tiktoken_tokenizer, doc):
    assert windowed_support(tiktoken_tokenizer) is None
    cache = _CACHES.setdefault(tiktoken_tokenizer.spec, ChunkTokenCache(max_bytes=1 << 20))
    text, spans = _layout(doc)
    full = full_starts(tiktoken_tokenizer, text).starts
    for _ in range(2):  # cold for this text, then warm
        stitched = stitched_starts(tiktoken_tokenizer, text, spans, cache=cache)
        assert stitched.verification == "windowed"
        assert np.array_equal(stitched.starts, full), (text, spans)
        assert len(stitched) == len(tiktoken_tokenizer.encode(text))


def test_core_of_long_word_chunks_is_cached(cl100k):
    cache = ChunkTokenCache()
    chunk = "The quick brown fox jumps over the lazy dog, again and again."
    text = "A:\n\n" + chunk + "\n\n" + chunk + "\n\nQ?"
    spans = [(4, 4 + len(chunk)), (6 + len(chunk), 6 + 2 * len(chunk))]
    first = stitched_starts(cl100k, text, spans, cache=cache)
    assert (cache.misses, cache.hits, len(cache)) == (1, 1, 1)
    assert np.array_equal(first.starts, full_starts(cl100k, text).starts)


def test_hf_tokenizer_falls_back_to_full_and_says_why(deepseek_v4):
    reason = windowed_support(deepseek_v4)
    assert reason is not None and "tiktoken" in reason
    text = "one two\n\nthree four"
    out = stitched_starts(deepseek_v4, text, [(0, 7), (9, len(text))], cache=ChunkTokenCache())
    assert out.verification == "full"
    assert out.starts.tolist() == list(deepseek_v4.tokenize(text).starts)


def test_no_cache_is_a_full_encode(cl100k):
    out = stitched_starts(cl100k, "alpha beta gamma", [(0, 16)], cache=None)
    assert out.verification == "full"
