"""Default evidence over a retrieved set: weights, keys by weight, the set-wide search.

The search (``evidence.search.set_key_chars``, one scan of the joined set) is checked
against the earlier per-chunk search kept as the oracle
(``tests/support/evidence_reference.py``), and against a slow regex reference for what
an occurrence is (``tests/unit/assembly/test_evidence_fast.py`` adds adversarial text).
"""

from __future__ import annotations

import random
import re

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from phaseaware.assembly import AssemblyOptions, Chunk, assemble
from phaseaware.assembly.evidence.keys import chunk_key_chars, find_key_chars, question_terms
from phaseaware.assembly.evidence.search import SENTENCE_END, sentence_ends, set_key_chars
from phaseaware.profiles.registry import get_profile
from tests.support.evidence_reference import reference_set_key_chars

TERMS = ("access", "code", "policy", "zorbia", "helios-7", "helios", "1000", "3.62")
PIECES = (
    "access", "Access", "CODE", "code", "policy", "Zorbia", "zorbias", "Helios-7", "helios",
    "Helios-70", "1000", "1,000", "10000", "3.62", "13.62", "3.625", "x", "é", "İ", "ß",
    " ", " ", " ", ". ", "! ", "\n", ",", "-", "_", "日本。", "7",
)  # fmt: skip

chunk_text = st.lists(st.sampled_from(PIECES), max_size=40).map("".join)
chunk_sets = st.lists(chunk_text, min_size=1, max_size=8)
term_sets = st.lists(st.sampled_from(TERMS), min_size=1, max_size=5, unique=True)


def _reference_occurrence(text: str, at: int, terms: tuple[str, ...]) -> bool:
    """Slow check: a term (or a thousands-grouped form of a number term) starts at ``at``."""
    for term in terms:
        body = re.escape(term)
        if term == "1000":
            body = "1[,\u00a0\u202f_]?000"
        numeric = term[0].isdigit()
        before = r"(?<!\w)(?<!\d[.,])" if numeric else r"(?<!\w)"
        after = r"(?!\w)(?![.,]\d)" if numeric else r"(?!\w)"
        if re.compile(before + body + after, re.IGNORECASE).match(text, at):
            return True
    return False


@settings(max_examples=300, deadline=None)
@given(texts=chunk_sets, terms=term_sets, max_keys=st.integers(1, 6))
def test_set_search_equals_the_reference(texts, terms, max_keys) -> None:
    assert set_key_chars(texts, terms=terms, max_keys=max_keys) == reference_set_key_chars(
        texts, terms=terms, max_keys=max_keys
    )


@settings(max_examples=200, deadline=None)
@given(texts=chunk_sets, terms=term_sets, max_keys=st.integers(1, 6))
def test_keys_are_term_occurrences_inside_their_chunk(texts, terms, max_keys) -> None:
    keys = set_key_chars(texts, terms=terms, max_keys=max_keys)
    for text, chunk_keys in zip(texts, keys, strict=True):
        assert len(chunk_keys) <= max_keys and len(set(chunk_keys)) == len(chunk_keys)
        for at in chunk_keys:
            assert 0 <= at < len(text)
            assert _reference_occurrence(text, at, tuple(terms)), (text, at)
        if chunk_keys:  # a chunk with keys: the first is an occurrence in its text
            assert text.strip()


@settings(max_examples=200, deadline=None)
@given(texts=chunk_sets, terms=term_sets, seed=st.integers(0, 2**16))
def test_deterministic_and_order_independent(texts, terms, seed) -> None:
    keys = set_key_chars(texts, terms=terms, max_keys=4)
    assert set_key_chars(list(texts), terms=list(terms), max_keys=4) == keys
    order = list(range(len(texts)))
    random.Random(seed).shuffle(order)
    shuffled = set_key_chars([texts[i] for i in order], terms=terms, max_keys=4)
    assert shuffled == tuple(keys[i] for i in order)


@settings(max_examples=300, deadline=None)
@given(text=chunk_text)
def test_sentence_ends_equal_the_regex(text) -> None:
    assert sentence_ends(text) == [m.end() for m in SENTENCE_END.finditer(text)]


def test_a_distinctive_name_is_the_key_not_the_common_words() -> None:
    question = "What is the access code policy for Varga?"
    common = "The access code policy was revised. Every access code follows the policy."
    texts = [
        f"{common} Under the policy, {n} holds access code 4410." for n in ("Novak", "Brennan")
    ]
    texts.append(f"{common} Varga joined in May. Under the policy, Varga holds access code 7.")
    keys = chunk_key_chars(
        [Chunk(text=t, id=str(i)) for i, t in enumerate(texts)],
        terms=question_terms(question),
        max_keys=8,
    )
    varga = texts[2]
    best = varga.index("Varga holds")
    assert keys[2][0] == best  # the best sentence's most distinctive term, first
    assert {varga[k : k + 5] for k in keys[2]} == {"Varga"}  # common words are no keys
    assert keys[0] and all(
        texts[0][k:].lower().startswith(("access", "code", "policy")) for k in keys[0]
    )


def test_without_weights_the_keys_keep_text_order() -> None:
    text = "Zorbia's capital (since 1990) is Qel. ZORBIA again; Zorbian is not a match."
    terms = question_terms("What is the capital of Zorbia in 1990?")
    assert find_key_chars(text, chunk_id="c", terms=terms) == (0, 9, 24, 38)


def test_explicit_evidence_is_unchanged_and_counts_in_the_weights() -> None:
    chunks = [
        Chunk(text="access code, access code", id="a", evidence=("code",)),
        Chunk(text="access code for Varga", id="b"),
        Chunk(text="", id="empty"),
    ]
    keys = chunk_key_chars(chunks, terms=("access", "code", "varga"), max_keys=8)
    assert keys[0] == (7, 20)  # every occurrence, sorted, as before
    assert keys[2] == ()
    # chunk a's text counts: "access" is in 2 of 2 chunks, "Varga" in 1
    assert keys[1] == (chunks[1].text.index("Varga"),)


def test_question_terms_ids_and_numbers() -> None:
    terms = question_terms("Is a Helios-7 module disabled below 3.62 volts or 1,000 cycles?")
    assert terms == ("helios-7", "helios", "module", "disabled", "below", "3.62", "volts",
                     "1,000", "cycles")  # fmt: skip
    text = "Helios-70 3.625 13.62 at 3.62 and 1000 or 1\u00a0000 then Helios-7."
    found = {text[k : k + 8] for k in find_key_chars(text, chunk_id="c", terms=terms)}
    # "Helios-70" holds the word "helios"; "3.625" and "13.62" are other numbers
    assert found == {"3.62 and", "1000 or ", "1\u00a0000 th", "Helios-7"}


@pytest.mark.parametrize("spec", ["tiktoken:o200k_base", "tiktoken:cl100k_base"])
def test_assembled_keys_are_the_name_tokens(spec) -> None:
    from phaseaware.tokenizers import load_tokenizer

    tok = load_tokenizer(spec)
    question = "What is the access code policy for Okonkwo?"
    rng = random.Random(3)
    chunks = []
    for i in range(12):
        who = "Okonkwo" if i in (4, 9) else f"Person{i}"
        sentences = ["The access code policy changed.", "Every access code is logged."] * 2
        sentences.insert(rng.randrange(5), f"Under the policy, {who} holds access code {i}.")
        chunks.append(Chunk(text=" ".join(sentences), id=f"c{i}", score=rng.random()))
    result = assemble(
        chunks, tokenizer=tok, chat_format="none", question=question,
        profile=get_profile("deepseek-v4-flash-base"), budget_tokens=4000,
        options=AssemblyOptions(allow_tokenizer_mismatch=True),
    )  # fmt: skip
    measured = tok.tokenize(result.prompt)
    holders = [p for p in result.placements if p.chunk_id in ("c4", "c9")]
    assert len(holders) == 2
    for p in holders:
        name_at = result.prompt.index("Okonkwo", p.char_start, p.char_end)
        assert p.key_token_positions == (measured.token_at_char(name_at),)
    for p in result.placements:
        for t, c in zip(p.key_token_positions, p.key_char_offsets, strict=True):
            assert p.char_start <= c < p.char_end and measured.token_at_char(c) == t
