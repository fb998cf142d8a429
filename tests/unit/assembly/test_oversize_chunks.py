"""A chunk far over the budget is dropped, reason "over budget", before any tokenizer sees
it; the bound it uses (tokens >= chars / K, K the longest token's bytes) is sound."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import phaseaware.assembly.prepare.measured_request as measured_request
from phaseaware import assemble
from phaseaware.tokenizers import load_tokenizer
from phaseaware.tokenizers.bound import max_token_bytes, min_tokens

QUESTION = "What is the access code for Alice?"


@pytest.mark.parametrize("spec", ["tiktoken:o200k_base", "deepseek-v4"])
def test_an_oversize_chunk_is_dropped_unread(spec, monkeypatch):
    tok = load_tokenizer(spec)
    k = max_token_bytes(tok)
    assert k is not None
    budget = 300
    huge = "lorem ipsum dolor " * ((budget * k) // 18 + 1000)
    seen: list[int] = []
    real = measured_request.measure_chunks

    def spy(chunks, **kwargs):
        seen.extend(len(c.text) for c in chunks)
        return real(chunks, **kwargs)

    monkeypatch.setattr(measured_request, "measure_chunks", spy)
    result = assemble(
        ["The access code for Alice is 123.", huge, "Bob likes tea."],
        tokenizer=tok, chat_format="chatml", question=QUESTION, budget_tokens=budget,
    )  # fmt: skip
    assert max(seen) < 100  # the huge text never reached the tokenizer
    (dropped,) = result.dropped
    assert dropped.chunk_id == "chunk-1" or dropped.chunk_id.endswith("1")
    assert dropped.reason.startswith("over budget") and "not tokenized" in dropped.reason
    assert "123" in result.prompt and result.token_count <= budget


def test_a_tokenizer_without_a_sound_bound_claims_none(reference_tokenizer):
    # word-level with an unknown token: one <unk> can stand for a word of any length
    assert max_token_bytes(reference_tokenizer) is None


@settings(max_examples=60, deadline=None)
@given(st.text(max_size=400))
def test_the_bound_never_exceeds_the_real_count(text):
    for spec in ("tiktoken:o200k_base", "deepseek-v4"):
        tok = load_tokenizer(spec)
        k = max_token_bytes(tok)
        assert k is not None
        assert min_tokens(len(text), k) <= len(tok.encode(text))
