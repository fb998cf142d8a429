"""The cached piece route of ``measure`` (HF): same counts and key tokens, and the chunk
cores it seeds are the ones ``stitch`` would encode itself."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from phaseaware.assembly.prepare import measure
from phaseaware.assembly.retokenize import windowed as stitch
from phaseaware.assembly.retokenize.windowed import ChunkTokenCache

WORDS = ["The", "report", "1990", "was", "é", "日本", "code", "4721.", "(a)", "x,", "\n", "  ",
         "<｜User｜>", "▁", "ーカ\u3099", "。", "，", "e\u0301", "\u200d", "12345"]  # fmt: skip
chunk_text = st.lists(st.sampled_from(WORDS), min_size=1, max_size=14).map(" ".join)


@pytest.fixture(scope="module")
def deepseek(deepseek_v4):
    deepseek_v4.fingerprint()
    return deepseek_v4


@settings(
    max_examples=300, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(texts=st.lists(chunk_text, min_size=2, max_size=6), data=st.data())
def test_cached_keyed_pieces_equal_plain_pieces(deepseek, texts, data):
    keys = [
        tuple(data.draw(st.lists(st.integers(0, len(t) - 1), max_size=4), label="keys"))
        for t in texts
    ]
    plain = measure._measure_pieces(deepseek, texts)
    cache = ChunkTokenCache()
    for _ in range(2):  # cold, then warm
        keyed = measure._measure_pieces(
            deepseek, texts, cache=cache, fingerprint=deepseek.fingerprint(), key_chars=keys
        )
        for text, ks, (n_a, at_a), (n_b, at_b) in zip(texts, keys, plain, keyed, strict=True):
            assert n_a == n_b
            assert [at_a(c) for c in ks] == list(at_b.key_tokens)
            assert [at_a(c) for c in range(len(text))] == [at_b(c) for c in range(len(text))]


@settings(
    max_examples=300, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(texts=st.lists(chunk_text, min_size=1, max_size=6, unique=True))
def test_seeded_cores_are_the_encoded_cores(deepseek, texts):
    cache = ChunkTokenCache()
    framed = ["\n\n" + t + "\n\n" for t in texts]
    stitch.cached_pieces(deepseek, framed, cache, fingerprint="f", chunks=texts, offset=2)
    family = stitch._family(deepseek)
    assert family is not None
    fp = deepseek.fingerprint()
    for text, encoded in zip(texts, stitch._entries(family, texts), strict=True):
        seeded = cache.get((fp, text))
        assert seeded is not None
        assert (seeded.a, seeded.b) == (encoded.a, encoded.b)
        if encoded.starts is None:
            assert seeded.starts is None
            continue
        assert np.array_equal(seeded.starts, encoded.starts)
        if seeded.whole is not None:  # head / tail alone, where kept
            if seeded.head_ok:
                head = deepseek.tokenize(text[: seeded.a]).starts
                assert seeded.whole[: seeded.i_a].tolist() == list(head)
            if seeded.tail_ok:
                tail = [s + seeded.b for s in deepseek.tokenize(text[seeded.b :]).starts]
                assert seeded.whole[seeded.i_b :].tolist() == tail


TIKTOKEN_WORDS = ["The", "report", "1990", "was", "é", "日本", "code", "4721.", "(a)", "x,", "\n",
                  "  ", "'s", "don't", "<|endoftext|>", "a|b", "e\u0301", "\u200d", "12345", "\t"]  # fmt: skip
tiktoken_chunk = st.lists(st.sampled_from(TIKTOKEN_WORDS), min_size=1, max_size=24).map(" ".join)


@pytest.mark.parametrize("name", ["cl100k_base", "o200k_base"])
@settings(
    max_examples=200, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(texts=st.lists(tiktoken_chunk, min_size=1, max_size=6, unique=True))
def test_cores_read_off_a_full_encode_are_the_encoded_cores(name, texts):
    """A cold tiktoken stitch encodes the whole text once and reads each new chunk's core
    off it; the entries equal the ones ``_entries`` encodes, and the result is the full
    encode."""
    from phaseaware.tokenizers import load_tokenizer

    tok = load_tokenizer(f"tiktoken:{name}")
    family = stitch._family(tok)
    assert family is not None
    sep = "\n\n"
    text = sep + "".join(t + sep for t in texts)
    spans, at = [], len(sep)
    for t in texts:
        spans.append((at, at + len(t)))
        at += len(t) + len(sep)
    cache = ChunkTokenCache()
    cold = stitch.stitched_starts(tok, text, spans, cache=cache)
    assert cold.starts.tolist() == list(tok.tokenize(text).starts)
    fp = tok.fingerprint()
    for chunk, encoded in zip(texts, stitch._entries(family, texts), strict=True):
        seeded = cache.get((fp, chunk))
        assert seeded is not None and (seeded.a, seeded.b) == (encoded.a, encoded.b)
        if encoded.starts is None:
            assert seeded.starts is None
        else:
            assert np.array_equal(seeded.starts, encoded.starts)
    warm = stitch.stitched_starts(tok, text, spans, cache=cache)
    assert warm.verification == "windowed" and np.array_equal(warm.starts, cold.starts)
