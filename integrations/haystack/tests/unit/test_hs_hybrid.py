"""A hybrid retriever's documents as they really come: two BM25 retrievers over the same
documents (stores using BM25Okapi and BM25Plus), joined by ``ListJoiner`` (which, unlike
``DocumentJoiner``, keeps every copy), so documents come twice with different scores.
The builder and the ranker take them in a real pipeline, and the report counts merges."""

from __future__ import annotations

from haystack import Document, Pipeline
from haystack.components.joiners import ListJoiner
from haystack.components.retrievers.in_memory import InMemoryBM25Retriever
from haystack.dataclasses import ChatMessage
from haystack.document_stores.in_memory import InMemoryDocumentStore
from haystack_integrations.components.builders.phaseaware import PhaseAwareChatPromptBuilder
from haystack_integrations.components.rankers.phaseaware import PhaseAwareRanker

QUESTION = "Below which voltage is the Helios-2 module disabled?"
DOCS = [
    Document(
        content=f"Note {i}: the Helios-{i} module is disabled below 3.{i}2 volts.", id=f"kb-{i}"
    )
    for i in range(6)
]
TEMPLATE = [
    ChatMessage.from_user(
        "{% for d in documents %}{{ d.content }}\n{% endfor %}\nQuestion: {{ question }}"
    )
]


def _pipeline(ranker: bool) -> Pipeline:
    pipe = Pipeline()
    for name, algorithm in (("bm25_okapi", "BM25Okapi"), ("bm25_plus", "BM25Plus")):
        store = InMemoryDocumentStore(bm25_algorithm=algorithm)  # type: ignore[arg-type]
        store.write_documents(DOCS)
        pipe.add_component(name, InMemoryBM25Retriever(store, top_k=3))
    pipe.add_component("joiner", ListJoiner(list[Document]))
    pipe.add_component("builder", PhaseAwareChatPromptBuilder(
        TEMPLATE, tokenizer="tiktoken:o200k_base", chat_format="chatml",
        profile="deepseek-v4-flash-base", budget_tokens=2000,
        options={"allow_tokenizer_mismatch": True},
    ))  # fmt: skip
    pipe.connect("bm25_okapi.documents", "joiner.values")
    pipe.connect("bm25_plus.documents", "joiner.values")
    if ranker:
        pipe.add_component("ranker", PhaseAwareRanker(profile="deepseek-v4-flash-base"))
        pipe.connect("joiner.values", "ranker.documents")
        pipe.connect("ranker.documents", "builder.documents")
    else:
        pipe.connect("joiner.values", "builder.documents")
    return pipe


def _run(pipe: Pipeline) -> dict:
    query = {"bm25_okapi": {"query": QUESTION}, "bm25_plus": {"query": QUESTION}}
    return pipe.run({**query, "builder": {"question": QUESTION}}, include_outputs_from={"joiner"})


def test_the_builder_merges_a_hybrid_retrievers_copies_and_counts_them() -> None:
    out = _run(_pipeline(ranker=False))
    joined = out["joiner"]["values"]
    distinct = {d.id for d in joined}
    assert len(distinct) < len(joined)  # the two retrievers agree on some documents
    report = out["builder"]["report"]
    assert sorted(p["document_id"] for p in report["placements"]) == sorted(distinct)
    assert sum(len(m["merged"]) for m in report["merged_duplicates"]) == len(joined) - len(distinct)
    for m in report["merged_duplicates"]:  # the kept copy has the best score of its id
        assert joined[m["kept"]].score == max(joined[i].score for i in [m["kept"], *m["merged"]])


def test_the_ranker_deduplicates_before_the_builder() -> None:
    out = _run(_pipeline(ranker=True))
    joined = out["joiner"]["values"]
    report = out["builder"]["report"]
    assert sorted(p["document_id"] for p in report["placements"]) == sorted({d.id for d in joined})
    assert report["merged_duplicates"] == []  # the ranker merged them already
