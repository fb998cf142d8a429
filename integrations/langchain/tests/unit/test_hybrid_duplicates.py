"""A hybrid retriever's output as it really comes: two BM25 variants over the same
documents (rank_bm25's Okapi and Plus), their results concatenated, so documents come
twice with different scores. Every drop-in takes it, merges the copies (best score) and
says so; the native async paths give the sync results."""

from __future__ import annotations

import asyncio
import re
from typing import Any

import pytest
from langchain_core.documents import BaseDocumentCompressor, BaseDocumentTransformer, Document
from langchain_core.prompts import ChatPromptTemplate
from langchain_phaseaware import PhaseAwareCompressor, PhaseAwarePrompt, PhaseAwareReorder

rank_bm25 = pytest.importorskip("rank_bm25")

QUESTION = "Below which voltage is the Helios-2 module disabled?"


def _words(text: str) -> list[str]:
    return re.findall(r"\w+", text.lower())


def hybrid(corpus: list[Document], query: str, k: int = 3) -> list[Document]:
    """Top ``k`` of BM25Okapi, then top ``k`` of BM25Plus, each copy with its own score."""
    tokens = [_words(d.page_content) for d in corpus]
    out = []
    for ranker in (rank_bm25.BM25Okapi(tokens), rank_bm25.BM25Plus(tokens)):
        scores = ranker.get_scores(_words(query))
        best = sorted(range(len(corpus)), key=lambda i: -scores[i])[:k]
        out += [
            Document(page_content=corpus[i].page_content, id=corpus[i].id,
                     metadata={**corpus[i].metadata, "score": float(scores[i])})
            for i in best
        ]  # fmt: skip
    return out


@pytest.fixture
def retrieved(make_documents: Any) -> list[Document]:
    docs = hybrid(make_documents(6), QUESTION)
    assert len({d.id for d in docs}) < len(docs)  # the retrievers agree on some documents
    return docs


def test_the_prompt_merges_copies_and_reports_them(retrieved, o200k, options, profile_name):
    prompt = PhaseAwarePrompt(
        ChatPromptTemplate.from_messages([("human", "{context}\n\n{question}")]),
        tokenizer=o200k, chat_format="chatml", profile=profile_name, budget_tokens=2000,
        options=options,
    )  # fmt: skip
    out = prompt.with_report().invoke({"question": QUESTION, "documents": retrieved})
    report = out["report"]
    distinct = {d.id for d in retrieved}
    assert sorted(p["document_id"] for p in report["placements"]) == sorted(distinct)
    copies = sum(len(m["merged"]) for m in report["merged_duplicates"])
    assert copies == len(retrieved) - len(distinct) > 0
    for m in report["merged_duplicates"]:  # the best-scored copy is the one kept
        group = [m["kept"], *m["merged"]]
        assert (
            max(retrieved[i].metadata["score"] for i in group)
            == (retrieved[m["kept"]].metadata["score"])
        )


def test_reorder_and_compressor_merge_and_their_async_paths_are_their_own(
    retrieved, o200k, options, profile_name
):
    reorder = PhaseAwareReorder(profile=profile_name)
    out = reorder.transform_documents(retrieved)
    assert sorted(d.id for d in out) == sorted({d.id for d in retrieved})
    assert asyncio.run(reorder.atransform_documents(retrieved)) == out
    compressor = PhaseAwareCompressor(
        tokenizer=o200k, profile=profile_name, budget_tokens=2000, prefix="Notes:\n",
        suffix=f"\n\n{QUESTION}", options=options,
    )  # fmt: skip
    compressed = compressor.compress_documents(retrieved, QUESTION)
    assert len(compressed) == len({d.id for d in retrieved})
    assert compressed[0].metadata["phaseaware"]["assembly"]["merged_duplicates"]
    assert asyncio.run(compressor.acompress_documents(retrieved, QUESTION)) == compressed
    # defined here, not the base classes' run-in-executor fallbacks
    assert (
        PhaseAwareReorder.atransform_documents is not BaseDocumentTransformer.atransform_documents
    )
    assert PhaseAwareCompressor.acompress_documents is not (
        BaseDocumentCompressor.acompress_documents
    )
