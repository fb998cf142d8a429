"""Benchmark: a Haystack RAG pipeline with phaseaware's builder against ChatPromptBuilder
and LostInTheMiddleRanker, on the demo's held-out questions, side by side.

Run: ``PYTHONPATH=.:integrations/haystack/src python benchmarks/haystack_rag.py
[--questions 400] [--profile FILE] [--base-url URL]``.

The questions are the demo's (``phaseaware.demo.questions_file.demo_questions``: a seed
stream calibration never saw; 5 chunks each, one holding the asked fact). Their chunks go
into one ``InMemoryDocumentStore`` (each tagged with its question); every pipeline
retrieves with Haystack's ``InMemoryBM25Retriever`` (top 5, filtered to the question's
chunks), formats with the same template and asks the shipped reference model through
Haystack's own ``OpenAIChatGenerator`` over HTTP (``phaseaware serve-reference``, started
here on a free loopback port unless ``--base-url`` names one). The three pipelines differ
in one component only:

- ``ChatPromptBuilder``: the documents in retrieval order;
- ``LostInTheMiddleRanker``: ranker, then ``ChatPromptBuilder``;
- ``phase-aware``: ``PhaseAwareChatPromptBuilder`` (reference tokenizer, ``hf`` chat format,
  the reference model's profile, 512 tokens).

After every generator a ``PhaseAwareUsageCheck`` (``on_mismatch="raise"``) compares the
server's ``usage.prompt_tokens`` with the messages sent: a prompt token count that differs
stops the run. Accuracy is exact match of the first number of the reply, with 95% Wilson
intervals; phase-aware is compared with each baseline by the exact McNemar test on the
same questions (wins: phase-aware right, the baseline wrong; losses: the reverse).
"""

from __future__ import annotations

import argparse
import contextlib
import os
import sys
import time
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from haystack import Document, Pipeline
from haystack.components.builders import ChatPromptBuilder
from haystack.components.generators.chat import OpenAIChatGenerator
from haystack.components.rankers import LostInTheMiddleRanker
from haystack.components.retrievers.in_memory import InMemoryBM25Retriever
from haystack.dataclasses import ChatMessage
from haystack.document_stores.in_memory import InMemoryDocumentStore
from haystack.utils import Secret
from haystack_integrations.components.builders.phaseaware import PhaseAwareChatPromptBuilder
from haystack_integrations.components.validators.phaseaware import PhaseAwareUsageCheck

from phaseaware.calibration import task
from phaseaware.calibration.stats.dist import binom_two_sided_half
from phaseaware.compare.questions import CompareQuestion
from phaseaware.demo.questions_file import BUDGET_TOKENS, demo_questions
from phaseaware.intervals import wilson_interval
from phaseaware.reference.paths import MODEL_NAME

ROOT = Path(__file__).resolve().parents[1]
PROFILE = ROOT / "integrations" / "haystack" / "tests" / "data" / "phaseaware-reference.json"
# one template for all three: documents joined by a blank line, then the question (the
# demo's layout; ChatPromptBuilder users write the loop this way)
TEMPLATE = "{% for d in documents %}{{ d.content }}\n\n{% endfor %}{{ question }}"
GENERATION = {"max_tokens": 4, "temperature": 0.0}
PIPELINES = ("ChatPromptBuilder", "LostInTheMiddleRanker", "phase-aware")
# serve-reference takes any key; an environment variable, so that the pipeline serialises
# (Haystack refuses to write a token secret to YAML)
KEY_VARIABLE = "PHASEAWARE_REFERENCE_API_KEY"


def document_store(questions: Sequence[CompareQuestion]) -> InMemoryDocumentStore:
    """Every question's chunks, tagged ``meta["question"]``, evidence in ``meta``."""
    store = InMemoryDocumentStore()
    store.write_documents([
        Document(id=c.id, content=c.text,
                 meta={"question": q.id, "evidence": list(c.evidence)})
        for q in questions for c in q.chunks
    ])  # fmt: skip
    return store


def pipeline(kind: str, *, store: InMemoryDocumentStore, base_url: str, profile: str) -> Pipeline:
    """retriever -> [ranker] -> builder -> OpenAIChatGenerator -> PhaseAwareUsageCheck."""
    os.environ.setdefault(KEY_VARIABLE, "unused")
    template = [ChatMessage.from_user(TEMPLATE)]
    pipe = Pipeline()
    pipe.add_component("retriever", InMemoryBM25Retriever(store, top_k=5))
    kwargs: dict[str, Any] = dict(GENERATION)
    if kind == "phase-aware":
        builder: Any = PhaseAwareChatPromptBuilder(
            template, tokenizer="reference", chat_format="hf", profile=profile,
            budget_tokens=BUDGET_TOKENS,
        )  # fmt: skip
        kwargs.update(builder.generation_kwargs())
    else:
        builder = ChatPromptBuilder(template=template, required_variables="*")
    pipe.add_component("builder", builder)
    pipe.add_component("llm", OpenAIChatGenerator(
        api_key=Secret.from_env_var(KEY_VARIABLE), model=MODEL_NAME, api_base_url=base_url,
        generation_kwargs=kwargs, max_retries=0, timeout=120,
    ))  # fmt: skip
    pipe.add_component("check", PhaseAwareUsageCheck(
        tokenizer="reference", chat_format="hf", on_mismatch="raise"
    ))  # fmt: skip
    if kind == "LostInTheMiddleRanker":
        pipe.add_component("ranker", LostInTheMiddleRanker())
        pipe.connect("retriever.documents", "ranker.documents")
        pipe.connect("ranker.documents", "builder.documents")
    else:
        pipe.connect("retriever.documents", "builder.documents")
    pipe.connect("builder.prompt", "llm.messages")
    pipe.connect("builder.prompt", "check.messages")
    pipe.connect("llm.replies", "check.replies")
    return pipe


@dataclass(frozen=True)
class Answer:
    right: bool
    prompt_tokens: int  # as the server counted them (equal to the plan: checked)
    messages: tuple[ChatMessage, ...]


def ask(pipe: Pipeline, q: CompareQuestion) -> Answer:
    """One question through ``pipe``; ``PromptTokenDriftError`` if the counts differ."""
    out = pipe.run(
        {
            "retriever": {"query": q.question,
                          "filters": {"field": "meta.question", "operator": "==", "value": q.id}},
            "builder": {"question": q.question},
        },
        include_outputs_from={"builder"},
    )  # fmt: skip
    check = out["check"]["usage_check"]
    if check is None or not check["ok"]:
        raise RuntimeError(f"{q.id}: the server reported no usage or another count: {check}")
    reply = out["check"]["replies"][0].text or ""
    right = task.extract_answer(reply) in q.answers
    return Answer(right, check["reported_tokens"], tuple(out["builder"]["prompt"]))


@dataclass(frozen=True)
class Comparison:
    questions: int
    right: dict[str, list[bool]]  # per pipeline, per question
    usage_checks: int  # calls whose prompt token count equalled the server's

    def paired(self, other: str) -> tuple[int, int, float]:
        """(wins, losses, exact McNemar p) of phase-aware against ``other``."""
        ours, theirs = self.right["phase-aware"], self.right[other]
        wins = sum(a and not b for a, b in zip(ours, theirs, strict=True))
        losses = sum(b and not a for a, b in zip(ours, theirs, strict=True))
        return wins, losses, binom_two_sided_half(wins, wins + losses)

    def lines(self) -> list[str]:
        n = self.questions
        out = [f"{n} held-out questions, reference model over HTTP (OpenAIChatGenerator)"]
        for name in PIPELINES:
            hits = sum(self.right[name])
            low, high = wilson_interval(hits, n)
            out.append(f"  {name:22s} {hits:4d}/{n}  {hits / n:6.1%}  95% CI {low:.1%}-{high:.1%}")
        for other in PIPELINES[:2]:
            wins, losses, p = self.paired(other)
            out.append(f"  phase-aware vs {other:22s} wins {wins}, losses {losses}, "
                       f"exact McNemar p = {p:.3g}")  # fmt: skip
        out.append(f"  prompt tokens equal to the server's on {self.usage_checks} of "
                   f"{n * len(PIPELINES)} calls")  # fmt: skip
        return out


def compare(
    questions: Sequence[CompareQuestion], *, base_url: str, profile: str,
    progress: Callable[[str], None] = lambda _: None,
) -> Comparison:  # fmt: skip
    """Every question through the three pipelines."""
    store = document_store(questions)
    pipes = {k: pipeline(k, store=store, base_url=base_url, profile=profile) for k in PIPELINES}
    right: dict[str, list[bool]] = {k: [] for k in PIPELINES}
    checks = 0
    for i, q in enumerate(questions):
        for name, pipe in pipes.items():
            right[name].append(ask(pipe, q).right)
            checks += 1
        if (i + 1) % 20 == 0:
            progress(f"{i + 1}/{len(questions)} questions")
    return Comparison(len(questions), right, checks)


@contextlib.contextmanager
def served(base_url: str | None) -> Iterator[str]:
    if base_url:
        yield base_url
        return
    sys.path.insert(0, str(ROOT / "examples"))
    from reference_server import reference_server

    with reference_server() as url:
        yield url


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--questions", type=int, default=400)
    parser.add_argument("--profile", default=str(PROFILE))
    parser.add_argument("--base-url", help="a running serve-reference (default: start one)")
    args = parser.parse_args()
    questions = demo_questions(count=args.questions, seed=0)
    started = time.perf_counter()
    with served(args.base_url) as base_url:
        result = compare(questions, base_url=base_url, profile=args.profile,
                         progress=lambda s: print(s, file=sys.stderr))  # fmt: skip
    print("\n".join(result.lines()))
    print(f"  ({time.perf_counter() - started:.0f} s)")


if __name__ == "__main__":
    main()
