"""Evidence: the question's key terms, key characters in a chunk, the repeat snippet."""

from __future__ import annotations

import pytest

from phaseaware.assembly.evidence.keys import evidence_snippet, find_key_chars, question_terms
from phaseaware.errors import InputError


def test_question_terms_and_key_chars() -> None:
    terms = question_terms("What is the capital of Zorbia in 1990?")
    assert terms == ("capital", "zorbia", "1990")
    text = "Zorbia's capital (since 1990) is Qel. ZORBIA again; Zorbian is not a match."
    offsets = find_key_chars(text, chunk_id="c", terms=terms)
    assert offsets == (0, 9, 24, 38)
    with pytest.raises(InputError, match="'nope' does not occur in chunk 'c'"):
        find_key_chars(text, chunk_id="c", evidence=["nope"])
    assert find_key_chars(text, chunk_id="c", evidence=["Qel"]) == (33,)


def test_evidence_snippet_sentence() -> None:
    text = "First sentence here. The key fact is 42. Last one follows."
    key = text.index("42")
    start, end = evidence_snippet(text, key, max_chars=25)
    assert text[start:end] == "The key fact is 42."
    assert evidence_snippet(text, key, max_chars=1000) == (0, len(text))
