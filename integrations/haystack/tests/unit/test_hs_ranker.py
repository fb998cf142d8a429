"""PhaseAwareRanker: LostInTheMiddleRanker's contract, phaseaware's order."""

from __future__ import annotations

import asyncio

import pytest
from haystack import Document, Pipeline
from haystack.components.rankers import LostInTheMiddleRanker
from haystack_integrations.components.rankers.phaseaware import PhaseAwareRanker
from hypothesis import given, settings
from hypothesis import strategies as st

from phaseaware import load_tokenizer

WORDS = "amber harbor ledger north gate copper cable valley timber river signal".split()


def _docs(scores: list[float | None]) -> list[Document]:
    return [
        Document(content=f"{WORDS[i % len(WORDS)]} note {i} " * (1 + i % 3), score=s, id=f"d{i}")
        for i, s in enumerate(scores)
    ]


scores_st = st.lists(
    st.one_of(st.none(), st.floats(min_value=0, max_value=1, allow_nan=False)), max_size=9
)


@settings(max_examples=40, deadline=None)
@given(scores=scores_st, top_k=st.one_of(st.none(), st.integers(1, 6)))
def test_same_documents_as_lost_in_the_middle_ranker_with_scores_sorted(scores, top_k) -> None:
    """Fed documents best-first (LostInTheMiddleRanker's assumption), both keep the same
    ``top_k`` documents, duplicates dropped, and put the two most relevant at the ends."""
    ranked = sorted(scores, key=lambda s: -1 if s is None else -s)
    ranked = [s for s in ranked if s is not None] + [s for s in ranked if s is None]
    docs = _docs(ranked)
    docs = docs + docs[:2]  # a second retriever's copies
    ours = PhaseAwareRanker(top_k=top_k).run(documents=docs)["documents"]
    theirs = LostInTheMiddleRanker(top_k=top_k).run(documents=docs)["documents"]
    assert sorted(d.id for d in ours) == sorted(d.id for d in theirs)
    if len(ours) >= 2:
        assert {ours[0].id, ours[-1].id} == {theirs[0].id, theirs[-1].id} == {"d0", "d1"}
        assert ours[-1].id == "d0"  # the most relevant last, nearest the question


def test_a_profile_orders_by_ascending_relevance() -> None:
    docs = _docs([0.2, 0.9, None, 0.5])
    out = PhaseAwareRanker(profile="deepseek-v4-flash-base").run(documents=docs)["documents"]
    assert [d.id for d in out] == ["d2", "d0", "d3", "d1"]  # unscored lowest, best last


def test_the_token_budget_is_never_crossed() -> None:
    tokenizer = load_tokenizer("tiktoken:o200k_base")
    docs = _docs([0.9, 0.8, 0.7, 0.6, 0.5])
    sizes = [len(tokenizer.encode(d.content or "")) for d in docs]
    ranker = PhaseAwareRanker(token_budget=sizes[0] + sizes[1], tokenizer="tiktoken:o200k_base")
    assert sorted(d.id for d in ranker.run(documents=docs)["documents"]) == ["d0", "d1"]
    smaller = ranker.run(documents=docs, token_budget=sizes[0] + sizes[1] - 1)["documents"]
    assert [d.id for d in smaller] == ["d0"]  # the second would cross it: left out, and after
    assert ranker.run(documents=docs, token_budget=sizes[0] - 1)["documents"] == []


def test_errors_are_lost_in_the_middle_rankers() -> None:
    with pytest.raises(ValueError, match="top_k must be an integer > 0"):
        PhaseAwareRanker(top_k=0)
    with pytest.raises(ValueError, match="pass tokenizer="):
        PhaseAwareRanker(token_budget=10)
    with pytest.raises(ValueError, match="holds no text"):
        PhaseAwareRanker().run(documents=[Document(id="x", content=None)])
    with pytest.raises(ValueError, match="share the id 'a'"):
        PhaseAwareRanker().run(
            documents=[Document(content="a", id="a"), Document(content="b", id="a")]
        )
    assert PhaseAwareRanker().run(documents=[]) == {"documents": []}


def test_run_async_and_a_yaml_round_trip_give_the_same_documents() -> None:
    docs = _docs([0.3, None, 0.8, 0.1, 0.5])
    ranker = PhaseAwareRanker(profile="deepseek-v4-flash-base", top_k=4)
    sync = ranker.run(documents=docs)
    assert asyncio.run(ranker.run_async(documents=docs)) == sync
    pipe = Pipeline()
    pipe.add_component("ranker", ranker)
    loaded = Pipeline.loads(pipe.dumps())
    assert loaded.run({"ranker": {"documents": docs}})["ranker"] == sync
    assert loaded.get_component("ranker").to_dict() == ranker.to_dict()
