"""The one-pass default-evidence search returns exactly what the per-chunk search did.

``tests/support/evidence_reference.py`` is the search as it was (per chunk, ``str.find``
per term form, Python checks per occurrence); ``set_key_chars`` now joins the set, scans
each form once with a boundary-checking expression and chooses keys per chunk from
position lists. Both must give the same tuples on every input: adversarial text (case
changes that alter length, final sigma, numbers with separators, no-break spaces, CJK,
the join separator inside a text, overlapping and nested terms, blank texts, ``wanted``
masks) and the benchmark's own chunk sets.
"""

from __future__ import annotations

import importlib.util
import re
import sys
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from phaseaware.assembly.evidence.keys import chunk_key_chars, question_terms
from phaseaware.assembly.evidence.search import set_key_chars
from phaseaware.assembly.evidence.terms import (
    SEPARATOR,
    bounded_pattern,
    compile_terms,
    is_word_char,
)
from phaseaware.assembly.inputs.chunks import Chunk
from phaseaware.caches import clear_caches
from tests.support.evidence_reference import reference_set_key_chars

# Pieces chosen to break each shortcut of the fast path: "İ" lowers to two characters
# (the length-keeping fallback), "Σ" lowers by context (final sigma), U+0301 is
# case-ignorable, "²" is a digit that is not decimal, "٣"/"１" are decimal digits of other
# scripts, "\0" is the join separator, "a-a"/"aa" overlap themselves, "b-c" overlaps
# "a-b", and "1,000" shares every form with "1000".
PIECES = (
    "access", "ACCESS", "Code", "code", "zorbia", "Zorbia", "helios", "Helios-7", "helios-70",
    "a-b", "b-c", "a-b-c", "a-a", "aa", "aaa", "σ", "Σ", "ΣΑΣ", "ς", "\u0301", "İ", "ß", "ẞ",
    "1000", "1,000", "1\u00a0000", "1\u202f000", "1_000", "10000", "3.62", "13.62", "3.625",
    "62", ".62", "62.", "2²", "²", "٣", "１", "x", "X", "_", "é", "E\u0301",
    " ", " ", "  ", "\u00a0", "\t", "\n", ". ", "! ", "? ", ".", ",", "-", "/", ":",
    "日本", "。", "！", "？", "金库代码", "\0", "\0a", "a\0",
)  # fmt: skip
TERMS = (
    "access", "code", "zorbia", "helios-7", "helios", "a-b", "b-c", "a-a", "aa", "1000",
    "1,000", "3.62", "62", "x", "σ", "ς", "σας", "2²", "²", "٣", "_", "é", "日本", "金库代码",
    "-x", "x-", " ", "a\0", "access code", "1000.5", "12,345.6", "ı", "i\u0307",
)  # fmt: skip

texts_st = st.lists(st.lists(st.sampled_from(PIECES), max_size=30).map("".join), max_size=8)
terms_st = st.one_of(
    st.lists(st.sampled_from(TERMS), max_size=6),
    st.lists(st.lists(st.sampled_from(PIECES), min_size=1, max_size=3).map("".join), max_size=4),
)


def _same(texts, terms, max_keys, wanted=None) -> None:
    slow = reference_set_key_chars(texts, terms=terms, max_keys=max_keys, wanted=wanted)
    clear_caches()
    for sight in ("first (str.split scan)", "second (compiled patterns)"):
        fast = set_key_chars(texts, terms=terms, max_keys=max_keys, wanted=wanted)
        assert fast == slow, (sight, texts, terms, max_keys, wanted)


@settings(max_examples=1500, deadline=None)
@given(texts=texts_st, terms=terms_st, max_keys=st.integers(0, 9), data=st.data())
def test_equals_the_reference_on_adversarial_text(texts, terms, max_keys, data) -> None:
    wanted = data.draw(st.one_of(st.none(), st.lists(st.booleans(), min_size=len(texts),
                                                     max_size=len(texts))))  # fmt: skip
    _same(texts, terms, max_keys, wanted)


@settings(max_examples=300, deadline=None)
@given(
    texts=st.lists(st.text(alphabet=st.sampled_from("aAb-. \n\0İΣσς1,0²_"), max_size=40),
                   max_size=6),
    terms=st.lists(st.text(alphabet=st.sampled_from("aAb-. 1,0σς"), max_size=4), max_size=4),
    max_keys=st.integers(1, 5),
)  # fmt: skip
def test_equals_the_reference_on_small_alphabets(texts, terms, max_keys) -> None:
    _same(texts, terms, max_keys)


WORDS = ("access", "Code", "zorbia", "Helios-7", "helios", "1,000", "1000", "filler", "the")
sentence_st = st.tuples(
    st.lists(st.sampled_from(WORDS), min_size=1, max_size=6).map(" ".join),
    st.sampled_from([". ", "! ", "? ", "\n", "。", ".", " "]),
).map("".join)


@settings(max_examples=700, deadline=None)
@given(
    texts=st.lists(st.lists(sentence_st, max_size=6).map("".join), min_size=1, max_size=6),
    terms=st.lists(st.sampled_from(TERMS[:12]), min_size=1, max_size=5),
    max_keys=st.integers(1, 8),
)
def test_equals_the_reference_across_sentences(texts, terms, max_keys) -> None:
    """Sentences dense in terms: ties between sentence scores, weights of several levels."""
    _same(texts, terms, max_keys)


def test_earliest_best_sentence_and_weight_floor() -> None:
    texts = ["access code. Code access. zorbia", "access code", "access"]
    for terms in (["access", "code"], ["code", "access"], ["access", "code", "zorbia"]):
        for max_keys in (1, 2, 8):
            _same(texts, terms, max_keys)
    assert set_key_chars(texts[:1], terms=["access", "code"], max_keys=1) == ((0,),)


def test_word_character_rule_is_re_word_on_every_code_point() -> None:
    """``bounded_pattern`` relies on ``\\w`` being exactly ``is_word_char``."""
    word = re.compile(r"\w")
    differ = [
        cp
        for cp in range(sys.maxunicode + 1)
        if (word.match(chr(cp)) is not None) != is_word_char(chr(cp))
    ]
    assert differ == []


def test_separator_reads_as_a_text_edge() -> None:
    """Not a word character, not a number separator, not space, neither cased nor
    case-ignorable (final sigma reads it as the end of the text)."""
    assert not is_word_char(SEPARATOR) and SEPARATOR not in ".," and not SEPARATOR.isspace()
    assert not SEPARATOR.isdigit() and SEPARATOR.lower() == SEPARATOR.upper() == SEPARATOR
    for text in ("ΑΣ", "Σ", "ΑΣ\u0301", "\u0301Σ", "ΑΣΑ"):
        for other in ("", "Α", "\u0301"):
            joined = SEPARATOR.join([text, other, text])
            assert joined.lower() == SEPARATOR.join([text.lower(), other.lower(), text.lower()])


def test_patterns_are_boundary_checked_literals() -> None:
    pattern = bounded_pattern("a-b")
    assert [m.start() for m in pattern.finditer("a-b xa-b a-bx (a-b) a-b")] == [0, 15, 20]
    clear_caches()
    search = compile_terms(["1000", "1,000", "a-b", "b-c"])
    assert search is not None and search.overlaps  # a-b-c: both valid, they overlap
    assert [f for f, _, _ in search.forms].count("1000") == 1  # one form, the first term's
    assert search.patterns is None  # compiled on the question's second search
    again = compile_terms(["1000", "1,000", "a-b", "b-c"])
    assert again is not None and again.patterns is not None and all(again.patterns)
    for terms, overlaps in (
        (["vault", "code", "tamarind"], False),
        (["helios-7", "helios"], True),
        (["a-a"], True),
        (["aa"], False),
        (["vaults", "vault"], False),
    ):
        found = compile_terms(terms)
        assert found is not None and found.overlaps is overlaps, terms
    safe = compile_terms(["a-a", "aa", "a\0b", "x"])
    assert safe is not None and safe.split_safe == (False, True, False, True)


def _benchmark_module():
    path = Path(__file__).resolve().parents[3] / "benchmarks" / "assembly.py"
    spec = importlib.util.spec_from_file_location("phaseaware_benchmark_assembly", path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


@pytest.mark.parametrize("max_keys", [1, 3, 8])
def test_equals_the_reference_on_the_benchmark_sets(max_keys) -> None:
    bench = _benchmark_module()
    sets = [
        bench.make_dense(20, 300, seed=3),
        bench.make_dense(60, 300, seed=4),
        bench.make_chunks(20, 300, seed=1),
        bench.make_cjk(20, seed=2),
        bench.make_code(20, seed=2),
    ]
    questions = [bench.QUESTION, "What is the access code policy for Varga?", "金库代码是多少？"]
    for chunks in sets:
        texts = [c.text for c in chunks]
        for question in questions:
            terms = question_terms(question)
            _same(texts, terms, max_keys)
            _same(texts, terms, max_keys, [i % 3 != 0 for i in range(len(texts))])
            keyed = [Chunk(text=c.text, id=c.id, evidence=c.text.split()[:1]) if i % 4 == 0
                     else c for i, c in enumerate(chunks)]  # fmt: skip
            fast = chunk_key_chars(keyed, terms=terms, max_keys=max_keys)
            wanted = [not (c.evidence or not c.text.strip()) for c in keyed]
            slow = reference_set_key_chars(texts, terms=terms, max_keys=max_keys, wanted=wanted)
            assert [k for k, w in zip(fast, wanted, strict=True) if w] == [
                k for k, w in zip(slow, wanted, strict=True) if w
            ]
