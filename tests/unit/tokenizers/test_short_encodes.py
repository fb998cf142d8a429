"""The per-tokenizer memos a warm assemble reads: equal to a fresh answer, per object."""

from __future__ import annotations

from phaseaware.tokenizers import load_tokenizer
from phaseaware.tokenizers.base import BatchTokenizer, CharIndexTokenizer, implements
from phaseaware.tokenizers.short_encodes import MAX_CHARS, encode_short


def test_short_encodes_equal_a_fresh_encode_and_are_fresh_lists() -> None:
    tok = load_tokenizer("tiktoken:cl100k_base")
    for text in ("", "\n\n", "Which vault code opens the archive?", "x" * (MAX_CHARS + 5)):
        first = encode_short(tok, text)
        assert first == tok.encode(text)
        first.append(-1)  # a caller's list is its own: the kept ids are untouched
        assert encode_short(tok, text) == tok.encode(text)


def test_short_encodes_are_kept_per_tokenizer_object() -> None:
    a, b = load_tokenizer("tiktoken:cl100k_base"), load_tokenizer("tiktoken:o200k_base")
    text = "phase-aware assembly of 17 chunks"
    assert encode_short(a, text) == a.encode(text)
    assert encode_short(b, text) == b.encode(text)


class _Plain:
    """An object with none of the tokenizer capabilities."""


def test_implements_answers_as_isinstance_does() -> None:
    tok = load_tokenizer("tiktoken:cl100k_base")
    plain = _Plain()
    for capability in (BatchTokenizer, CharIndexTokenizer):
        assert implements(tok, capability) == isinstance(tok, capability)
        assert implements(tok, capability) == isinstance(tok, capability)  # remembered
        assert implements(plain, capability) is False
