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


class _NoWeakref:
    """A windowed tokenizer stand-in without weak-reference support (``__slots__``)."""

    __slots__ = ("_tok",)

    def __init__(self, tok: object) -> None:
        self._tok = tok

    def __getattr__(self, name: str) -> object:
        return getattr(self._tok, name)


def test_capability_memo_is_bounded_listed_and_holds_objects_without_weakrefs() -> None:
    from phaseaware.caches import clear_caches, list_caches

    tok = load_tokenizer("tiktoken:cl100k_base")
    wrapped = _NoWeakref(tok)
    assert windowed.windowed_support(wrapped) == tok.window_support()  # type: ignore[arg-type]
    recipe = windowed._family(wrapped)  # type: ignore[arg-type]
    assert recipe is not None and windowed._family(wrapped) is recipe  # type: ignore[arg-type]
    windowed._family(tok)
    listed = {c.name: c for c in list_caches()}["assembly.windowed_capabilities"]
    assert 1 <= listed.entries <= 64 and listed.bound == "LRU, 64 entries"
    for _ in range(100):  # many short-lived objects: the memo stays within its bound
        assert windowed._family(_Plain()) is None  # type: ignore[arg-type]
    assert len(windowed._DECIDED) <= 64
    clear_caches()
    assert len(windowed._DECIDED) == 0
    assert windowed.windowed_support(tok) == tok.window_support()  # decided afresh


def test_cut_encodes_equal_a_fresh_encode_per_object() -> None:
    a, b = load_tokenizer("tiktoken:cl100k_base"), load_tokenizer("tiktoken:o200k_base")
    for text in ("", "phase-aware assembly of 17 chunks", "x" * (prefix.MAX_CUT_CHARS + 5)):
        for tok in (a, b, a, b):
            first = prefix._cut_ids(tok, text)
            assert first == tok.encode(text)
            first.append(-1)  # the caller's list is its own: the kept ids are untouched
            assert prefix._cut_ids(tok, text) == tok.encode(text)
