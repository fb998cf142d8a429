"""Shared parts of the LangChain examples: local notes and a BM25 retriever. All offline
(the server and the profile: example_cli.py).

Run the examples from the repository root (``python examples/langchain_rag.py``) after
the README's LangChain install line (``example_cli.INSTALL["langchain"]``).
"""

from __future__ import annotations

import re
from typing import Any

from example_cli import MODEL, needs

with needs("langchain"):
    from langchain_core.callbacks import CallbackManagerForRetrieverRun
    from langchain_core.documents import Document
    from langchain_core.retrievers import BaseRetriever
    from pydantic import ConfigDict, PrivateAttr
    from rank_bm25 import BM25Okapi

    from phaseaware.assembly import Chunk
    from phaseaware.demo.rag_questions import RagQuestion, make_questions
    from phaseaware.demo.run import CHUNKS_PER_QUESTION, MAX_FILLER_SENTENCES

__all__ = ["MODEL", "BM25Retriever", "check_answer", "local_notes"]

_WORD = re.compile(r"\w+")
_FACT = re.compile(r"The access code for (\S+) is (\S+) \.")


def _words(text: str) -> list[str]:
    return [w.lower() for w in _WORD.findall(text)]


class BM25Retriever(BaseRetriever):
    """Top-``k`` documents by BM25 (rank_bm25), the score in ``metadata["score"]``.

    Like a search engine's highlights, ``metadata["evidence"]`` lists the rare query
    words (in fewer than half of the documents) that the document contains, as they
    are written in it. Returns new Document objects; the corpus is never modified.
    """

    model_config = ConfigDict(arbitrary_types_allowed=True)
    documents: list[Document]
    k: int = 5
    _index: BM25Okapi = PrivateAttr()
    _df: dict[str, int] = PrivateAttr()

    def model_post_init(self, context: Any) -> None:
        words = [_words(d.page_content) for d in self.documents]
        self._index = BM25Okapi(words)
        self._df = {}
        for doc_words in words:
            for word in set(doc_words):
                self._df[word] = self._df.get(word, 0) + 1

    def _get_relevant_documents(
        self, query: str, *, run_manager: CallbackManagerForRetrieverRun
    ) -> list[Document]:
        rare = [w for w in _words(query) if self._df.get(w, 0) <= len(self.documents) // 2]
        scores = self._index.get_scores(rare)
        best = sorted(range(len(scores)), key=lambda i: (-scores[i], i))[: self.k]
        out = []
        for i in best:
            doc = self.documents[i]
            found = (re.search(rf"\b{re.escape(w)}\b", doc.page_content, re.I) for w in rare)
            evidence = [m.group(0) for m in found if m is not None]
            metadata = {**doc.metadata, "score": round(float(scores[i]), 4), "evidence": evidence}
            out.append(Document(page_content=doc.page_content, metadata=metadata, id=doc.id))
        return out


def local_notes(count: int = 8, seed: int = 50_000) -> tuple[list[Document], list[RagQuestion]]:
    """Notes in the reference model's language (one access code per note) and questions.

    Each question's notes hold its answer and four distractor facts; the corpus pools
    them all, so the retriever must find the right notes among the others. Pooled notes
    must not contradict each other (the seeded generator reuses names across questions:
    Kira could be 221 in one question's distractor and 378 in another's answer), so the
    questions are the first ``count`` of a larger seeded pool whose answers agree, and a
    distractor note that gives a name another code than a kept note does is left out.
    """
    pool = make_questions(
        count=4 * count,
        seed=seed,
        chunks_per_question=CHUNKS_PER_QUESTION,
        max_filler_sentences=MAX_FILLER_SENTENCES,
    )
    facts: dict[str, str] = {}

    def consistent(chunk: Chunk) -> bool:
        found = dict(_FACT.findall(chunk.text))
        if any(facts.get(name, code) != code for name, code in found.items()):
            return False
        facts.update(found)
        return True

    questions = []  # the first ``count`` questions whose evidence agrees with the others'
    for q in pool:
        if q.key_name not in facts and consistent(_evidence(q)):
            questions.append(q)
        if len(questions) == count:
            break
    kept = [_evidence(q) for q in questions]
    kept += [
        c for q in questions for c in q.chunks if c.id != q.evidence_chunk_id and consistent(c)
    ]
    order = {c.id: i for i, c in enumerate(c for q in questions for c in q.chunks)}
    corpus = [
        Document(page_content=c.text, metadata={"source": c.id}, id=c.id)
        for c in sorted(kept, key=lambda c: order[c.id])
    ]
    return corpus, questions


def _evidence(question: RagQuestion) -> Chunk:
    return next(c for c in question.chunks if c.id == question.evidence_chunk_id)


def check_answer(question: str, answer: str, expected: str) -> bool:
    """Print the answer against the expected one; ``True`` when they match."""
    ok = answer.strip() == expected.strip()
    verdict = "OK" if ok else "WRONG"
    print(f"\n{question}  ->  {answer.strip()!r}  (expected {expected}: {verdict})")
    return ok
