"""The rank-BPE twin of DeepSeek-V4's tokenizer gives exactly the ids ``tokenizers`` gives.

The oracle is always the Rust ``tokenizers`` backend itself (``encode_batch_fast``
without special tokens). Fact 1 (the BPE) is checked by the proof over every merge rule;
fact 2 (the pieces) exhaustively over short ASCII strings, by hypothesis over long
ones, and on real text (this repository's own ASCII files).
"""

from __future__ import annotations

import itertools
import json
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from phaseaware.tokenizers import load_tokenizer, registry
from phaseaware.tokenizers.hf import HFTokenizer, load_hf_tokenizer
from phaseaware.tokenizers.rank_bpe import PROVEN, RankTwin, model_digest, rank_twin
from phaseaware.tokenizers.rank_bpe_proof import rank_bpe_failures

ROOT = Path(__file__).resolve().parents[3]


@pytest.fixture(scope="module")
def tok() -> HFTokenizer:
    loaded = load_tokenizer("deepseek-v4")
    assert isinstance(loaded, HFTokenizer)
    assert loaded.prepare_rank_engine()
    return loaded


@pytest.fixture(scope="module")
def twin(tok: HFTokenizer) -> RankTwin:
    got = tok._twins.current()
    assert got is not None
    return got


def fresh_deepseek_v4() -> HFTokenizer:
    """A new tokenizer object (``load_tokenizer`` hands out one per spec)."""
    return load_hf_tokenizer(
        str(registry.deepseek_v4_dir()), spec="deepseek-v4", bos_text=registry.DEEPSEEK_V4_BOS
    )


def hf_ids(tok: HFTokenizer, texts: list[str]) -> list[list[int]]:
    return [e.ids for e in tok.backend.encode_batch_fast(texts, add_special_tokens=False)]


def twin_ids(twin: RankTwin, texts: list[str]) -> list[list[int]]:
    return [list(ids) for ids in twin.encoding.encode_ordinary_batch(texts)]


def test_the_proof_holds_for_the_proven_model(tok: HFTokenizer) -> None:
    assert model_digest(tok.backend) in PROVEN
    assert rank_bpe_failures(tok.backend) == []


def test_the_proof_finds_a_rule_rank_bpe_would_take_otherwise(tok: HFTokenizer) -> None:
    from tokenizers import Tokenizer

    state = json.loads(tok.backend.to_str())
    merges = state["model"]["merges"]
    # move "Ġt" + "he" (-> "Ġthe") before "Ġ" + "t": rank BPE of "Ġthe" now differs
    state["model"]["merges"] = [merges[1]] + merges[:1] + merges[2:]
    changed = Tokenizer.from_str(json.dumps(state))
    assert model_digest(changed) != model_digest(tok.backend)
    assert rank_bpe_failures(changed)
    assert rank_twin(changed, []) is None  # not proven: no twin


def test_short_strings_of_every_character_class(tok: HFTokenizer, twin: RankTwin) -> None:
    """Every string of length <= 5 over one character of each class (digit, letters, two
    punctuation, each kind of space, a control) and a vertical tab."""
    alphabet = "7aZ!. \t\r\n\x01\x0b"
    texts = ["".join(p) for n in range(1, 6) for p in itertools.product(alphabet, repeat=n)]
    assert hf_ids(tok, texts) == twin_ids(twin, texts)


def test_every_ascii_character_in_context(tok: HFTokenizer, twin: RankTwin) -> None:
    """Each ASCII character's class as the regexes see it: all pairs, and each character
    between every pair of class representatives."""
    chars = [chr(c) for c in range(128)]
    texts = [a + b for a in chars for b in chars]
    texts += [x + c + y for c in chars for x in "a7 \n\x01." for y in "a7 \n\x01.b"]
    assert hf_ids(tok, texts) == twin_ids(twin, texts)


_ASCII_TEXT = st.lists(
    st.one_of(
        st.sampled_from(["the", "Vault", "code", "archive", "ing", "HTTP", "x", "QQ", "'s", "n't"]),
        st.from_regex(r"[0-9]{1,7}", fullmatch=True),
        st.sampled_from([" ", "  ", "\n", "\n\n", "\r\n", "\t", " \n ", "   \t", "\x0b", "\x0c"]),
        st.sampled_from(list("!\"#$%&'()*+,-./:;<=>?@[\\]^_`{|}~")),
        st.text(alphabet=st.characters(max_codepoint=127), max_size=6),
    ),
    max_size=60,
).map("".join)


@settings(max_examples=400, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(text=_ASCII_TEXT)
def test_ascii_text_encodes_the_same(tok: HFTokenizer, twin: RankTwin, text: str) -> None:
    assert twin.ids(text) == hf_ids(tok, [text])[0]


def test_real_text_encodes_the_same(tok: HFTokenizer, twin: RankTwin) -> None:
    """This repository's own ASCII sources and docs, whole files (some name added tokens)."""
    paths = sorted(ROOT.glob("phaseaware/**/*.py")) + sorted(ROOT.glob("docs/*.md"))
    texts = [t for t in (p.read_text(encoding="utf-8") for p in paths) if t.isascii()]
    assert len(texts) > 100
    assert [twin.ids(t) for t in texts] == hf_ids(tok, texts)


def _added_contents(tok: HFTokenizer) -> list[str]:
    return sorted(str(t.content) for t in tok.backend.get_added_tokens_decoder().values())


@pytest.fixture(scope="module")
def added_text(tok: HFTokenizer) -> st.SearchStrategy[str]:
    """ASCII text mixed with added-token contents, raw-matched and normalized ones, whole,
    cut short, glued to each other, and stray non-ASCII characters."""
    contents = _added_contents(tok)
    normalized = sorted(
        str(t.content) for t in tok.backend.get_added_tokens_decoder().values() if t.normalized
    )
    assert normalized  # both kinds are exercised
    whole = st.sampled_from(contents[:40] + contents[-40:] + normalized)
    cut = st.builds(lambda c, k: c[: max(1, k % len(c))], whole, st.integers(0, 40))
    tail = st.builds(lambda c, k: c[k % len(c) :], whole, st.integers(1, 40))
    return st.lists(
        st.one_of(whole, cut, tail, _ASCII_TEXT, st.sampled_from(["\u00e9", "\uff5c", "\u2581"])),
        max_size=12,
    ).map("".join)


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(data=st.data())
def test_added_tokens_are_split_out_as_tokenizers_does(
    tok: HFTokenizer, twin: RankTwin, added_text: st.SearchStrategy[str], data: st.DataObject
) -> None:
    text = data.draw(added_text)
    want = hf_ids(tok, [text])[0]
    got = twin.ids(text)
    assert got is None or got == want
    assert (got is None) == any(
        not piece.isascii() for piece, added in twin._split(text) if not added
    )
    assert tok.encode(text) == want


def test_the_twin_steps_aside_where_it_may_differ(tok: HFTokenizer, twin: RankTwin) -> None:
    for text in ["caf\u00e9", "\u5317\u4eac 12", "a\u200db", "<think>\u00e9</think>"]:
        assert twin.ids(text) is None
        assert tok.encode(text) == hf_ids(tok, [text])[0]  # the backend encodes it
    for text in ["<think>x</think>", "a <|EOT|> b", "a <think b", registry.DEEPSEEK_V4_BOS + "Hi"]:
        assert twin.ids(text) == hf_ids(tok, [text])[0]
    assert tok.backend.token_to_id("<|EOT|>") in tok.encode("a <|EOT|> b")  # the added token


def test_the_tokenizer_builds_the_twin_after_enough_text_or_when_asked(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    from phaseaware.tokenizers import rank_bpe

    monkeypatch.setattr(rank_bpe, "BUILD_AFTER_CHARS", 1000)
    fresh = fresh_deepseek_v4()
    text = "The vault code is 4242. " * 20
    first = fresh.encode(text)  # 480 characters: not yet
    assert not fresh._twins.built
    assert first == hf_ids(fresh, [text])[0]
    assert fresh.encode(text + text) == hf_ids(fresh, [text + text])[0]  # 1,440: built, used
    assert isinstance(fresh._twins.current(), RankTwin)
    assert fresh.tokenize_batch([text])[0].ids == tuple(first)


def test_the_twin_can_be_turned_off(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("PHASEAWARE_RANK_BPE", "off")
    fresh = fresh_deepseek_v4()
    assert fresh.prepare_rank_engine() is False
    assert fresh.encode("The vault code is 4242.") == hf_ids(fresh, ["The vault code is 4242."])[0]


def test_other_tokenizers_get_no_twin() -> None:
    reference = load_tokenizer("reference")
    assert isinstance(reference, HFTokenizer)
    assert reference.prepare_rank_engine() is False


def test_long_pieces_encode_the_same(tok: HFTokenizer, twin: RankTwin) -> None:
    """Pieces thousands of bytes long (tiktoken merges those by another loop)."""
    letters = "".join("abcdefghij"[(i * 7 + i // 3) % 10] for i in range(20_000))
    texts = [" " * 5000, "a" * 10_000, "ab" * 4000, "!" * 3000, "-=" * 2000, "\n" * 1000 + "x"]
    texts += ["\t \t" * 500, letters, "9" * 4000]
    assert [twin.ids(t) for t in texts] == hf_ids(tok, texts)
