"""``tokenize_batch`` equals per-text ``tokenize`` on real tokenizers (and raw backend ids)."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from phaseaware.tokenizers.offsets import char_starts, split_start_arrays, split_starts

FIXTURES = ["cl100k", "o200k", "deepseek_v4"]  # shared session fixtures (conftest.py)
PIECES = [" ", "\n\n", "\r\n", "🎉", "日本語", "e\u0301", "<|endoftext|>", "<｜User｜>", " 1234"]
texts = st.lists(st.one_of(st.text(max_size=10), st.sampled_from(PIECES)), max_size=6).map("".join)


@pytest.fixture(params=FIXTURES)
def tokenizer(request):
    return request.getfixturevalue(request.param)


def _valid(text: str) -> bool:
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        return False
    return True


@settings(
    max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(batch=st.lists(texts, max_size=6))
def test_tokenize_batch_equals_per_text_tokenize(tokenizer, batch):
    batch = [t for t in batch if _valid(t)]
    got = tokenizer.tokenize_batch(batch)
    assert got == [tokenizer.tokenize(t) for t in batch]
    for text, tokenized in zip(batch, got, strict=True):
        assert list(tokenized.ids) == tokenizer.encode(text)


@settings(
    max_examples=40, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(text=texts)
def test_hf_fast_ids_equal_backend_encode(deepseek_v4, text):
    """The offset-free fast path returns exactly the ids of the backend's full encode."""
    if not _valid(text):
        return
    tok = deepseek_v4
    backend = tok.hf_tokenizer.backend_tokenizer
    assert tok.encode(text) == backend.encode(text, add_special_tokens=False).ids
    assert list(tok.tokenize(text).ids) == backend.encode(text, add_special_tokens=False).ids


def test_tokenize_batch_empty_and_single(tokenizer):
    assert tokenizer.tokenize_batch([]) == []
    assert tokenizer.tokenize_batch(["", "a"]) == [tokenizer.tokenize(""), tokenizer.tokenize("a")]


def test_split_starts_matches_char_starts_per_text():
    texts = ["aé", "", "日本 x", "z"]
    raws = [t.encode() for t in texts]
    per_text = [[1, 2], [], [3, 3, 1, 1], [1]]  # byte lengths of made-up tokens
    flat = [n for lengths in per_text for n in lengths]
    got = split_starts(texts, raws, flat, [len(x) for x in per_text])
    assert got == [char_starts(r, x) for r, x in zip(raws, per_text, strict=True)]
    assert split_starts(texts, raws, [*flat[:-1], 2], [len(x) for x in per_text]) is None


@settings(
    max_examples=40, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(batch=st.lists(texts, max_size=6))
def test_hf_token_starts_batch_equals_per_text_tokenize(deepseek_v4, batch):
    """The byte-table route's starts arrays (one batch) equal each text's own ``tokenize``."""
    batch = [t for t in batch if _valid(t)]
    got = deepseek_v4.token_starts_batch(batch)
    assert [tuple(a.tolist()) for a in got] == [deepseek_v4.tokenize(t).starts for t in batch]


def test_split_start_arrays_checks_every_text_and_handles_one():
    texts = ["aé", "", "日本 x", "z"]
    raws = [t.encode() for t in texts]
    per_text = [[1, 2], [], [3, 3, 1, 1], [1]]
    flat = np.asarray([n for lengths in per_text for n in lengths], dtype=np.int64)
    got = split_start_arrays(texts, raws, flat, [len(x) for x in per_text])
    assert got is not None
    assert [tuple(a.tolist()) for a in got] == [
        char_starts(r, x) for r, x in zip(raws, per_text, strict=True)
    ]
    # the same total, but "aé" given no tokens and its bytes counted in the next text's
    moved = [[], [1, 2], [3, 3, 1, 1], [1]]
    assert split_start_arrays(texts, raws, flat, [len(x) for x in moved]) is None
    one = split_start_arrays(["日本"], ["日本".encode()], np.asarray([3, 3]), [2])
    assert one is not None and one[0].tolist() == [0, 1]
    assert split_start_arrays(["日本"], ["日本".encode()], np.asarray([3, 2]), [2]) is None
    assert split_start_arrays([], [], np.zeros(0, dtype=np.int64), []) == []
