"""A hybrid retriever's nodes as they really come: two BM25 variants (rank_bm25's Okapi
and Plus) over the same nodes, their results concatenated, so nodes come twice with
different scores. The postprocessor and the reorder merge the copies (best score) and
the report counts them; the async paths give the sync results."""

from __future__ import annotations

import asyncio
import re

import pytest

rank_bm25 = pytest.importorskip("rank_bm25")

from llama_index.core.postprocessor.types import BaseNodePostprocessor  # noqa: E402
from llama_index.core.schema import NodeWithScore, QueryBundle, TextNode  # noqa: E402
from llama_index.postprocessor.phaseaware import (  # noqa: E402
    ASSEMBLY_KEY,
    PhaseAwarePostprocessor,
    PhaseAwareReorder,
)

from phaseaware import AssemblyOptions  # noqa: E402

QUESTION = "Below which voltage is the Helios-2 module disabled?"
NODES = [
    TextNode(text=f"Note {i}: the Helios-{i} module is disabled below 3.{i}2 volts.", id_=f"kb-{i}")
    for i in range(6)
]


def _words(text: str) -> list[str]:
    return re.findall(r"\w+", text.lower())


def hybrid(query: str, k: int = 3) -> list[NodeWithScore]:
    tokens = [_words(n.text) for n in NODES]
    out = []
    for ranker in (rank_bm25.BM25Okapi(tokens), rank_bm25.BM25Plus(tokens)):
        scores = ranker.get_scores(_words(query))
        best = sorted(range(len(NODES)), key=lambda i: -scores[i])[:k]
        out += [NodeWithScore(node=NODES[i], score=float(scores[i])) for i in best]
    return out


def test_postprocessor_and_reorder_merge_copies_sync_and_async() -> None:
    nodes = hybrid(QUESTION)
    distinct = {n.node.node_id for n in nodes}
    assert len(distinct) < len(nodes)
    post = PhaseAwarePostprocessor(
        tokenizer="tiktoken:o200k_base", chat_format="chatml", profile="deepseek-v4-flash-base",
        budget_tokens=2000, options=AssemblyOptions(allow_tokenizer_mismatch=True),
    )  # fmt: skip
    bundle = QueryBundle(QUESTION)
    out = post.postprocess_nodes(nodes, query_bundle=bundle)
    assert sorted(n.node.node_id for n in out) == sorted(distinct)
    report = out[0].node.metadata[ASSEMBLY_KEY]
    assert sum(len(m["merged"]) for m in report["merged_duplicates"]) == len(nodes) - len(distinct)
    done = asyncio.run(post.apostprocess_nodes(nodes, query_bundle=bundle))
    assert [(n.node.node_id, n.node.text) for n in done] == [
        (n.node.node_id, n.node.text) for n in out
    ]
    reorder = PhaseAwareReorder(profile="deepseek-v4-flash-base")
    ordered = reorder.postprocess_nodes(nodes, query_bundle=bundle)
    assert sorted(n.node.node_id for n in ordered) == sorted(distinct)
    assert asyncio.run(reorder.apostprocess_nodes(nodes, query_bundle=bundle)) == ordered
    assert PhaseAwareReorder._apostprocess_nodes is not BaseNodePostprocessor._apostprocess_nodes
