"""PhaseAwareReorder: the ``LongContextReorder`` call shape, the kit's order, nothing mutated."""

from __future__ import annotations

import asyncio
import copy
from typing import Any

import pytest
from langchain_core.documents import BaseDocumentTransformer, Document
from langchain_phaseaware import PhaseAwareReorder

from phaseaware import get_profile
from phaseaware.errors import InputError, PhaseawareError
from phaseaware.integrate import UnusableScoreWarning


def _litm(documents: list[Any]) -> list[Any]:
    """langchain-community's ``LongContextReorder`` arrangement (``_litm_reordering``),
    on a copy: the original reverses the caller's list in place."""
    documents = list(reversed(documents))
    out: list[Any] = []
    for i, value in enumerate(documents):
        if i % 2 == 1:
            out.append(value)
        else:
            out.insert(0, value)
    return out


def _docs(n: int, **scores: float) -> list[Document]:
    return [
        Document(page_content=f"note {i}", metadata={"score": scores[f"d{i}"]} if scores else {})
        for i in range(n)
    ]


def test_it_is_a_document_transformer_with_the_same_call_shape():
    reorder = PhaseAwareReorder()
    assert isinstance(reorder, BaseDocumentTransformer)
    assert reorder.transform_documents([]) == []
    docs = _docs(3)
    assert asyncio.run(reorder.atransform_documents(docs)) == reorder.transform_documents(docs)


@pytest.mark.parametrize("n", range(1, 9))
def test_without_a_profile_it_is_lost_in_the_middle_with_the_top_document_last(n):
    docs = _docs(n)  # retrieval order: docs[0] is the most relevant
    before = copy.deepcopy(docs)
    out = PhaseAwareReorder().transform_documents(docs)
    assert docs == before  # neither the list nor the documents changed
    assert sorted(map(id, out)) == sorted(map(id, docs))  # the same objects, none dropped
    assert out[-1] is docs[0]
    # LongContextReorder's arrangement; it puts the top document first when n is odd
    expected = _litm(docs)
    assert list(out) == (expected if n % 2 == 0 else expected[::-1])


def test_scores_in_the_metadata_decide_relevance():
    docs = _docs(4, d0=0.1, d1=0.9, d2=0.5, d3=0.7)
    out = PhaseAwareReorder().transform_documents(docs)
    # by relevance: d1, d3, d2, d0 -> ends hold the two best, the middle the two worst
    assert [d.page_content for d in out] == ["note 3", "note 0", "note 2", "note 1"]
    custom = [Document(page_content=d.page_content, metadata={"rel": d.metadata["score"]})
              for d in docs]  # fmt: skip
    out = PhaseAwareReorder(score_keys=("rel",)).transform_documents(custom)
    assert [d.page_content for d in out] == ["note 3", "note 0", "note 2", "note 1"]


def test_with_a_profile_the_most_relevant_goes_last(profile_name):
    docs = _docs(5, d0=0.3, d1=0.9, d2=0.1, d3=0.7, d4=0.5)
    for profile in (profile_name, get_profile(profile_name)):
        out = PhaseAwareReorder(profile=profile).transform_documents(docs)
        assert [d.page_content for d in out] == ["note 2", "note 0", "note 4", "note 3", "note 1"]


def test_bad_input_is_a_typed_error_that_names_the_document():
    with pytest.raises(PhaseawareError, match="no-such-model"):
        PhaseAwareReorder(profile="no-such-model")
    with pytest.raises(InputError, match="Document"):
        PhaseAwareReorder().transform_documents(["plain text"])  # type: ignore[list-item]


@pytest.mark.parametrize("bad", ["0.9", "high", float("nan"), float("inf"), True])
def test_an_unusable_score_orders_like_a_missing_one(bad):
    """LongContextReorder, whose drop-in this is, never raises on a score (issue 38): an
    unusable one orders as missing, with one warning naming the document."""
    docs = _docs(4, d0=0.3, d1=0.9, d2=0.1, d3=0.7)
    hostile = [*docs[:2], Document(page_content="note 2", metadata={"score": bad}), docs[3]]
    missing = [*docs[:2], Document(page_content="note 2"), docs[3]]
    with pytest.warns(UnusableScoreWarning, match=r"documents\[2\].*no finite number") as got:
        out = PhaseAwareReorder().transform_documents(hostile)
    assert len(got) == 1
    expected = PhaseAwareReorder().transform_documents(missing)
    assert [d.page_content for d in out] == [d.page_content for d in expected]
    assert hostile[2].metadata["score"] is bad  # the caller's document untouched
