"""LlamaIndex RAG with phaseaware, offline: BM25 -> PhaseAwarePostprocessor -> PhaseAwareSynthesizer.

Starts ``phaseaware serve-reference`` (the shipped reference model, OpenAI-compatible)
on a free loopback port, indexes local documents with a small BM25 retriever
(rank_bm25), asks a question through LlamaIndex's own ``OpenAILike`` chat model,
and prints where the evidence landed: absolute token position, residue mod 8 and
the profile's expected accuracy, checked against the server's usage.prompt_tokens.

    python examples/llama_index_rag.py [--profile FILE]   # after the README's LlamaIndex line
    python examples/llama_index_rag.py --base-url http://127.0.0.1:8000/v1   # a running server

Nothing is downloaded. The profile is the reference model's calibration: ``--profile``,
else the one ``phaseaware demo`` wrote, else a quick calibration (~30 s).
"""

from __future__ import annotations

import re
from typing import Any

from example_cli import example_parser, needs, preflight, reference_profile, served
from example_cli import run as run_example

preflight()  # a dead --base-url fails before the imports below

with needs("llama-index"):
    from llama_index.core import PromptTemplate
    from llama_index.core.retrievers import BaseRetriever
    from llama_index.core.schema import NodeWithScore, QueryBundle, TextNode
    from llama_index.llms.openai_like import OpenAILike
    from llama_index.postprocessor.phaseaware import (
        PLACEMENT_KEY,
        SENT_KEY,
        phaseaware_query_engine,
    )
    from rank_bm25 import BM25Okapi

# Local documents in the reference model's task language (word-level vocabulary).
DOCUMENTS = {
    "harbor-notes": (
        "waits near the old garden . Every bright station fades beyond every silver valley . "
        "The access code for Priya is 317 . That late tower rests behind one narrow market ."
    ),
    "market-log": (
        "turns beside that open harbor . The access code for Hugo is 204 . "
        "One green lamp rests under every silver bridge . A quiet river waits near the old garden ."
    ),
    "valley-diary": (
        "sleeps across a wooden valley . That early meadow grows behind the heavy window . "
        "The access code for Mina is 259 . The wooden letter falls across one busy station ."
    ),
    "station-memo": (
        "drifts under that gentle forest . The busy market moves beyond that cold tower . "
        "The access code for Umar is 382 . Every narrow station sleeps across a wooden valley ."
    ),
}


class BM25Retriever(BaseRetriever):
    """Keyword retrieval over in-memory nodes with rank_bm25 (lower-cased word tokens)."""

    def __init__(self, nodes: list[TextNode], *, top_k: int = 4) -> None:
        super().__init__()
        self._nodes = nodes
        self._top_k = top_k
        self._bm25 = BM25Okapi([self._words(n.text) for n in nodes])

    @staticmethod
    def _words(text: str) -> list[str]:
        return re.findall(r"\w+", text.lower())

    def _retrieve(self, query_bundle: QueryBundle) -> list[NodeWithScore]:
        scores = self._bm25.get_scores(self._words(query_bundle.query_str))
        ranked = sorted(range(len(self._nodes)), key=lambda i: (-scores[i], i))[: self._top_k]
        return [NodeWithScore(node=self._nodes[i], score=float(scores[i])) for i in ranked]


_FACT = re.compile(r"The access code for (\S+) is (\S+) \.")
#: The answer to every question the documents can answer.
EXPECTED = {
    f"What is the access code for {name} ?": code
    for text in DOCUMENTS.values()
    for name, code in _FACT.findall(text)
}


def run(base_url: str, question: str, profile: Any) -> int:
    nodes = [
        TextNode(text=text, id_=name, metadata={"file_name": f"{name}.txt"},
                 excluded_llm_metadata_keys=["file_name"])
        for name, text in DOCUMENTS.items()
    ]  # fmt: skip
    llm = OpenAILike(
        model="phaseaware-reference",
        api_base=base_url,
        api_key="x",
        is_chat_model=True,
        max_tokens=4,
        temperature=0.0,
        max_retries=0,
    )
    engine = phaseaware_query_engine(
        BM25Retriever(nodes),
        llm=llm,
        tokenizer="reference",
        chat_format="hf",  # the server renders messages with the model's own chat template
        profile=profile,
        budget_tokens=512,
        text_qa_template=PromptTemplate("{context_str}\n\n{query_str}"),
        on_mismatch="raise",
    )
    response = engine.query(question)
    sent = response.metadata[SENT_KEY]  # what was sent, and the usage check
    print(f"question: {question}")
    answer = str(response).strip()
    expected = EXPECTED.get(question)
    ok = expected is None or answer == expected
    verdict = "" if expected is None else f"  (expected {expected}: {'OK' if ok else 'WRONG'})"
    print(f"answer:   {answer}{verdict}")
    print(f"prompt:   {sent.token_count} tokens planned; server counted "
          f"{sent.check.reported_tokens if sent.check else 'n/a'}")  # fmt: skip
    print(f"{'order':>5}  {'node':14} {'pad':>3}  {'key positions':16} {'residues':10} exp.acc")
    for n in response.source_nodes:
        p = n.node.metadata[PLACEMENT_KEY]
        acc = "-" if p["expected_accuracy"] is None else f"{p['expected_accuracy']:.3f}"
        keys = ",".join(map(str, p["key_token_positions"]))
        residues = ",".join(map(str, p["residues"]))
        print(f"{p['order']:>5}  {n.node.node_id:14} {p['padding_tokens']:>3}  {keys:16} "
              f"{residues:10} {acc}")  # fmt: skip
    return 0 if ok else 1


def main(argv: list[str] | None = None) -> int:
    parser = example_parser(__doc__)
    parser.add_argument("--question", default="What is the access code for Mina ?")
    args = parser.parse_args(argv)
    with served(args) as base_url:  # a given --base-url is checked first (3 s)
        return run(base_url, args.question, reference_profile(args.profile))


if __name__ == "__main__":
    raise SystemExit(run_example(main))
