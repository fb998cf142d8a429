"""Chunk measurement: the parallel piece batch agrees with the single joined call."""

from __future__ import annotations

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from phaseaware.assembly.inputs.chunks import normalize_chunks
from phaseaware.assembly.prepare import measure
from phaseaware.tokenizers import load_tokenizer

WORDS = ["The", "report", "1990", "was", "é", "日本", "code", "4721.", "(a)", "x,"]
chunk_text = st.lists(st.sampled_from(WORDS), min_size=1, max_size=12).map(" ".join)


@pytest.fixture(scope="module", params=["tiktoken:cl100k_base", "deepseek-v4"])
def tokenizer(request):
    return load_tokenizer(request.param)


@settings(
    max_examples=30, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(texts=st.lists(chunk_text, min_size=2, max_size=6))
def test_pieces_equal_joined_for_word_bounded_chunks(tokenizer, texts):
    joined = measure._measure_joined(tokenizer, texts)
    pieces = measure._measure_pieces(tokenizer, texts)
    for text, (n_a, at_a), (n_b, at_b) in zip(texts, joined, pieces, strict=True):
        assert n_a == n_b
        assert [at_a(c) for c in range(len(text))] == [at_b(c) for c in range(len(text))]


def test_measure_chunks_uses_batch_only_for_parallel_tokenizers(monkeypatch):
    tok = load_tokenizer("deepseek-v4")
    calls = []
    monkeypatch.setattr(
        measure, "_measure_pieces", lambda t, x: calls.append(len(x)) or [(1, int)] * len(x)
    )
    chunks = normalize_chunks(["alpha beta", "  ", "gamma"])
    out = measure.measure_chunks(chunks, tokenizer=tok, terms=(), max_keys=4)
    assert calls == [2] and [m.empty for m in out] == [False, True, False]
