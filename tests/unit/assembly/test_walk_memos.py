"""The memos retokenize keeps itself (capability per tokenizer object, cut encodes):
equal to a fresh answer, used only for the same object."""

from __future__ import annotations

from phaseaware.assembly.retokenize import prefix, windowed
from phaseaware.tokenizers import load_tokenizer
from phaseaware.tokenizers.windowing import NOT_WINDOWED, WindowedTokenizer


class _Plain:
    """An object with none of the tokenizer capabilities."""


def test_capability_is_decided_once_per_object_and_as_isinstance_says() -> None:
    tok = load_tokenizer("tiktoken:cl100k_base")
    assert isinstance(tok, WindowedTokenizer)
    recipe = windowed._family(tok)
    fresh = tok.window_recipe()
    assert recipe is not None and fresh is not None and recipe.bar_specials == fresh.bar_specials
    assert windowed._family(tok) is recipe  # decided once: the same recipe object again
    assert windowed.windowed_support(tok) == tok.window_support()
    plain = _Plain()
    assert windowed._family(plain) is None  # type: ignore[arg-type]
    assert windowed.windowed_support(plain) == NOT_WINDOWED  # type: ignore[arg-type]


def test_cut_encodes_equal_a_fresh_encode_per_object() -> None:
    a, b = load_tokenizer("tiktoken:cl100k_base"), load_tokenizer("tiktoken:o200k_base")
    for text in ("", "phase-aware assembly of 17 chunks", "x" * (prefix.MAX_CUT_CHARS + 5)):
        for tok in (a, b, a, b):
            first = prefix._cut_ids(tok, text)
            assert first == tok.encode(text)
            first.append(-1)  # the caller's list is its own: the kept ids are untouched
            assert prefix._cut_ids(tok, text) == tok.encode(text)
