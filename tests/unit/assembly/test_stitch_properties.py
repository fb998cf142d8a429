"""Windowed verification (``assembly.stitch``) equals a full re-tokenization, always.

Adversarial chunk boundaries: whitespace runs, combining marks, ZWJ emoji,
digit runs, CJK, contractions, special-token look-alikes. 2,000 cases per
tiktoken encoding and 2,000 for DeepSeek-V4 (its added-token fragments too),
each checked cold (cache empty for the text) and warm; for DeepSeek-V4 also
every cut of random texts directly (tokens of T == tokens of T[:p] + T[p:]).
"""

from __future__ import annotations

import json
from pathlib import Path
from unittest import mock

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from phaseaware.assembly.retokenize import windowed as stitch
from phaseaware.assembly.retokenize.windowed import (
    ChunkTokenCache,
    cached_pieces,
    full_starts,
    stitched_starts,
    windowed_support,
)
from phaseaware.tokenizers import load_tokenizer
from phaseaware.tokenizers.hf import HFTokenizer
from phaseaware.tokenizers.hf_files import TokenizerFolder
from phaseaware.tokenizers.hf_windowed import hf_window_rule

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
    for _ in range(2):  # cold for this text (new chunks may be read off one full encode)
        stitched = stitched_starts(tiktoken_tokenizer, text, spans, cache=cache)
        assert np.array_equal(stitched.starts, full), (text, spans)
        assert len(stitched) == len(tiktoken_tokenizer.encode(text))
    assert stitched.verification == "windowed"  # warm: stitched from the entries
    # the cold route that encodes new cores and the junctions apart (never one full encode)
    with mock.patch.object(stitch, "FULL_ENCODE_SHARE", float("inf")):
        fresh = ChunkTokenCache()
        for _ in range(2):
            stitched = stitched_starts(tiktoken_tokenizer, text, spans, cache=fresh)
            assert stitched.verification == "windowed"
            assert np.array_equal(stitched.starts, full), (text, spans)


def test_core_of_long_word_chunks_is_cached(cl100k):
    cache = ChunkTokenCache()
    chunk = "The quick brown fox jumps over the lazy dog, again and again."
    text = "A:\n\n" + chunk + "\n\n" + chunk + "\n\nQ?"
    spans = [(4, 4 + len(chunk)), (6 + len(chunk), 6 + 2 * len(chunk))]
    first = stitched_starts(cl100k, text, spans, cache=cache)
    assert (cache.misses, cache.hits, len(cache)) == (1, 1, 1)
    assert np.array_equal(first.starts, full_starts(cl100k, text).starts)


def test_no_cache_is_a_full_encode(cl100k):
    out = stitched_starts(cl100k, "alpha beta gamma", [(0, 16)], cache=None)
    assert out.verification == "full"


# DeepSeek-V4: its pre-tokenizer's classes (digits, the CJK split's ranges incl. U+3099,
# U+30FB, U+30FC), whitespace runs, and fragments of its added tokens around every seam.
HF_ATOMS = [
    *ATOMS,
    "<｜", "｜>", "▁", "｜", "<|EOT|>", "<|EOT", "EOT|>", "<｜User｜>", "<｜Assistant｜>",
    "<｜end▁of▁sentence｜>", "begin▁of", "<think>", "</think>", "think>", "<dsml:", "dsml",
    "<｜/table>｜", "<｜td｜>", "image2", "e2", "e_", "k>", "l:", "T|",
    "\u3099", "カ\u3099", "\u30fb", "\u30fc", "ー", "ひらがな", "カタカナ", "龥", "\u3040", "\u3097",
    "〇", "一二三", "Ⅻ", "½", "\r", "\x0b", "\x1c", "\x85", "\u2028", "\x00", "\x7f", "é", "Ω",
    "12a", "a1", "1\n", "\nx", "\n1", "x\n", "中1", "1中", "a中", "中a", "。a", "a。",
    "、", "「", "」", "（", "）", "：", "？", "1。", "。1", "4，", "（2", "】",
]  # fmt: skip
HF_SEPARATORS = [*SEPARATORS, "<｜User｜>", "▁", "｜", "<", ">", "\n\n<think>\n"]

hf_atom_text = st.lists(st.sampled_from(HF_ATOMS), min_size=1, max_size=14).map("".join)
hf_documents = st.tuples(
    st.sampled_from(["", "<｜begin▁of▁sentence｜><｜User｜>", "Context:\n", "x", "<"]),
    st.lists(st.tuples(st.sampled_from(HF_SEPARATORS), hf_atom_text), min_size=1, max_size=5),
    st.sampled_from(["", "\n\n", "<｜Assistant｜></think>", " end", "｜>", "?"]),
)


@pytest.fixture(scope="module")
def deepseek(deepseek_v4):
    deepseek_v4.fingerprint()
    return deepseek_v4


@settings(
    max_examples=2000,
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)
@given(doc=hf_documents, seed=st.booleans())
def test_windowed_equals_full_tokenization_deepseek_v4(deepseek, doc, seed):
    assert windowed_support(deepseek) is None
    cache = _CACHES.setdefault(deepseek.spec, ChunkTokenCache(max_bytes=1 << 20))
    text, spans = _layout(doc)
    if seed:  # cores seeded from "\n\n c \n\n" pieces, as measure_chunks does
        chunks = [text[a:b] for a, b in spans]
        framed = ["\n\n" + c + "\n\n" for c in chunks]
        cached_pieces(deepseek, framed, cache, fingerprint="t", chunks=chunks, offset=2)
    full = full_starts(deepseek, text).starts
    for _ in range(2):  # cold for this text (or seeded), then warm
        stitched = stitched_starts(deepseek, text, spans, cache=cache)
        assert stitched.verification == "windowed"
        assert np.array_equal(stitched.starts, full), (text, spans)
        assert len(stitched) == len(deepseek.encode(text))


@settings(
    max_examples=2000,
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)
@given(text=st.one_of(hf_atom_text, st.text(min_size=2, max_size=16)))
def test_every_deepseek_v4_cut_splits_the_encoding(deepseek, text):
    rule = hf_window_rule(deepseek.backend)[1]
    assert rule is not None
    ids = deepseek.encode(text)
    for p in rule.positions(text):
        assert 0 < p < len(text)
        assert deepseek.encode(text[:p]) + deepseek.encode(text[p:]) == ids, (text, p)


def test_no_deepseek_v4_cut_falls_inside_an_added_token(deepseek):
    rule = hf_window_rule(deepseek.backend)[1]
    assert rule is not None
    contents = [str(t.content) for t in deepseek._backend.get_added_tokens_decoder().values()]
    assert len(contents) > 1000
    for content in contents:
        assert rule.positions(content) == [], content
        assert rule.positions("a" + content + "a")[1:-1] == [], content


def _variant(deepseek, edit) -> HFTokenizer:
    from tokenizers import Tokenizer

    config = json.loads(deepseek._backend.to_str())
    edit(config)
    folder = TokenizerFolder(
        folder=Path("."), backend=Tokenizer.from_str(json.dumps(config)),
        bos_token=None, eos_token=None, chat_template=None,
    )  # fmt: skip
    return HFTokenizer.from_folder(folder, spec="hf:variant")


def _other_digits(config):
    config["pre_tokenizer"]["pretokenizers"][0]["pattern"]["Regex"] = "\\p{N}{1,2}"


def _normalizer(config):
    config["normalizer"] = {"type": "NFC"}


def _lstrip(config):
    config["added_tokens"][0]["lstrip"] = True


@pytest.mark.parametrize(
    ("edit", "words"),
    [(_other_digits, "pre-tokenizer"), (_normalizer, "normalizer"), (_lstrip, "strips")],
)
def test_other_hf_configs_fall_back_to_full_and_say_why(deepseek, edit, words):
    tok = _variant(deepseek, edit)
    reason = windowed_support(tok)
    assert reason is not None and words in reason
    text = "one two three four five six\n\nseven eight nine ten eleven twelve"
    out = stitched_starts(tok, text, [(0, 27), (29, len(text))], cache=ChunkTokenCache())
    assert out.verification == "full"
    assert out.starts.tolist() == list(tok.tokenize(text).starts)


def test_deepseek_v4_is_windowed_and_caches_cores(deepseek):
    cache = ChunkTokenCache()
    chunk = "The quick brown fox jumps over the lazy dog, again and again."
    text = "<｜User｜>" + chunk + "\n\n" + chunk + "<｜Assistant｜>"
    start = len("<｜User｜>")
    spans = [(start, start + len(chunk)), (start + len(chunk) + 2, start + 2 * len(chunk) + 2)]
    out = stitched_starts(deepseek, text, spans, cache=cache)
    assert out.verification == "windowed"
    assert (cache.misses, cache.hits, len(cache)) == (1, 1, 1)
    assert np.array_equal(out.starts, full_starts(deepseek, text).starts)
