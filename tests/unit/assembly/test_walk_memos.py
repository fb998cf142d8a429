"""The memos retokenize keeps itself (capability per tokenizer object, cut encodes):
equal to a fresh answer, used only for the same object."""

from __future__ import annotations

from phaseaware.assembly.retokenize import prefix, windowed
from phaseaware.tokenizers import load_tokenizer
from phaseaware.tokenizers.windowing import WindowedTokenizer


class _Plain:
    """An object with none of the tokenizer capabilities."""


def test_capability_is_decided_once_per_object_and_as_isinstance_says() -> None:
    tok = load_tokenizer("tiktoken:cl100k_base")
    for _ in range(2):  # the second answer is the remembered one
        assert isinstance(tok, WindowedTokenizer)
        assert windowed._family(tok) == tok.window_recipe()
        assert windowed.windowed_support(tok) == tok.window_support()
    plain = _Plain()
    assert windowed._family(plain) is None  # type: ignore[arg-type]
    assert windowed.windowed_support(plain) == windowed.NOT_WINDOWED  # type: ignore[arg-type]


def test_cut_encodes_equal_a_fresh_encode_per_object() -> None:
    a, b = load_tokenizer("tiktoken:cl100k_base"), load_tokenizer("tiktoken:o200k_base")
    for text in ("", "phase-aware assembly of 17 chunks", "x" * (prefix.MAX_CUT_CHARS + 5)):
        for tok in (a, b, a, b):
            first = prefix._cut_ids(tok, text)
            assert first == tok.encode(text)
            first.append(-1)  # the caller's list is its own: the kept ids are untouched
            assert prefix._cut_ids(tok, text) == tok.encode(text)
