"""Haystack RAG, offline: a real Haystack pipeline with the phase-aware prompt builder.

Notes -> InMemoryBM25Retriever -> PhaseAwareChatPromptBuilder -> OpenAIChatGenerator ->
PhaseAwareUsageCheck.

``OpenAIChatGenerator`` (Haystack's own) talks to ``phaseaware serve-reference``, started
here as a subprocess on 127.0.0.1 (a free port), or to the one ``--base-url`` names. For
each question the script prints the answer and where every retrieved note's key token
landed (prompt position, residue mod 8, the profile's expected accuracy there); the
usage check compares the server's ``usage.prompt_tokens`` with the planned prompt on
every call (``on_mismatch="raise"``).
Then the pipeline goes through Haystack's YAML (``Pipeline.dumps`` / ``Pipeline.loads``)
and the loaded one must send the same messages. It exits with status 1 when an answer
differs from the expected one.

    python examples/haystack_rag.py [--profile FILE]   # after the README's Haystack install line
    python examples/haystack_rag.py --base-url http://127.0.0.1:8000/v1   # a running server
"""

from __future__ import annotations

import os
import re
from typing import Any

from example_cli import (
    MODEL,
    example_parser,
    needs,
    preflight,
    reference_profile_file,
    run,
    served,
)

preflight()  # a dead --base-url fails before the imports below

with needs("haystack"):
    from haystack import Document, Pipeline
    from haystack.components.generators.chat import OpenAIChatGenerator
    from haystack.components.retrievers.in_memory import InMemoryBM25Retriever
    from haystack.dataclasses import ChatMessage
    from haystack.document_stores.in_memory import InMemoryDocumentStore
    from haystack.utils import Secret
    from haystack_integrations.components.builders.phaseaware import (
        PhaseAwareChatPromptBuilder,
    )
    from haystack_integrations.components.validators.phaseaware import PhaseAwareUsageCheck

    from phaseaware.compare.questions import CompareQuestion
    from phaseaware.demo.questions_file import BUDGET_TOKENS, demo_questions

# serve-reference takes any key; an environment variable, so that the pipeline serialises
# (Haystack refuses to write a token secret to YAML)
KEY_VARIABLE = "PHASEAWARE_REFERENCE_API_KEY"
_FACT = re.compile(r"The access code for (\S+) is (\S+) \.")
# ChatPromptBuilder's usual RAG template: the loop over `documents` is where they go
TEMPLATE = [
    ChatMessage.from_user("{% for d in documents %}{{ d.content }}\n\n{% endfor %}{{ question }}")
]


def local_notes(count: int) -> tuple[list[Document], list[CompareQuestion]]:
    """The first ``count`` held-out demo questions whose facts agree with each other, and
    their chunks pooled as notes (a note that gives a name another code is left out)."""
    facts: dict[str, str] = {}
    notes: list[Document] = []
    questions: list[CompareQuestion] = []
    for q in demo_questions(count=10 * count, seed=0):
        found = [dict(_FACT.findall(c.text)) for c in q.chunks]
        asked = next(f for f in found if q.answers[0] in f.values())
        if any(facts.get(name, code) != code for name, code in asked.items()):
            continue
        questions.append(q)
        for chunk, fact in zip(q.chunks, found, strict=True):
            if all(facts.setdefault(name, code) == code for name, code in fact.items()):
                notes.append(Document(id=chunk.id, content=chunk.text,
                                      meta={"evidence": list(chunk.evidence)}))  # fmt: skip
        if len(questions) == count:
            break
    return notes, questions


def rag_pipeline(notes: list[Document], *, base_url: str, profile: str) -> Pipeline:
    os.environ.setdefault(KEY_VARIABLE, "unused")
    store = InMemoryDocumentStore()
    store.write_documents(notes)
    builder = PhaseAwareChatPromptBuilder(
        TEMPLATE, tokenizer="reference", chat_format="hf", profile=profile,
        budget_tokens=BUDGET_TOKENS,
    )  # fmt: skip
    llm = OpenAIChatGenerator(
        api_key=Secret.from_env_var(KEY_VARIABLE), model=MODEL, api_base_url=base_url,
        generation_kwargs={"max_tokens": 4, "temperature": 0.0, **builder.generation_kwargs()},
    )  # fmt: skip
    pipe = Pipeline()
    pipe.add_component("retriever", InMemoryBM25Retriever(store, top_k=5))
    pipe.add_component("builder", builder)
    pipe.add_component("llm", llm)
    pipe.add_component("check", PhaseAwareUsageCheck(
        tokenizer="reference", chat_format="hf", on_mismatch="raise"
    ))  # fmt: skip
    pipe.connect("retriever.documents", "builder.documents")
    pipe.connect("builder.prompt", "llm.messages")
    pipe.connect("builder.prompt", "check.messages")
    pipe.connect("llm.replies", "check.replies")
    return pipe


def ask(pipe: Pipeline, question: str) -> dict[str, Any]:
    data = {"retriever": {"query": question}, "builder": {"question": question}}
    return pipe.run(data, include_outputs_from={"builder"})


def main(argv: list[str] | None = None) -> int:
    parser = example_parser(__doc__)
    parser.add_argument("--questions", type=int, default=4, help="questions to ask (default 4)")
    args = parser.parse_args(argv)

    wrong = 0
    # a given --base-url is checked first (3 s); the builder takes the profile's path (it
    # serialises it), so a calibrated one lives in a temporary folder until the block ends
    with served(args) as base_url, reference_profile_file(args.profile) as profile:
        notes, questions = local_notes(args.questions)
        pipe = rag_pipeline(notes, base_url=base_url, profile=profile)
        for q in questions:
            out = ask(pipe, q.question)
            answer = (out["check"]["replies"][0].text or "").strip()
            ok = answer == q.answers[0]
            wrong += not ok
            print(f"\n{q.question}  ->  {answer!r}  (expected {q.answers[0]}: "
                  f"{'OK' if ok else 'WRONG'})")  # fmt: skip
            report, usage = out["builder"]["report"], out["check"]["usage_check"]
            print(f"prompt {report['token_count']} tokens, server counted "
                  f"{usage['reported_tokens']}: usage.prompt_tokens checked")  # fmt: skip
            print("  order  note      pad  key positions  residues  exp.acc")
            for p in report["placements"]:
                acc = p["expected_accuracy"]
                print(
                    f"  {p['order']:5d}  {p['document_id']:8s} {p['padding_tokens']:4d}  "
                    f"{','.join(map(str, p['key_token_positions'])):13s}  "
                    f"{','.join(map(str, p['residues'])):8s}  "
                    f"{'-' if acc is None else f'{acc:.3f}'}"
                )
        loaded = Pipeline.loads(pipe.dumps())  # Haystack's YAML, both ways
        first = questions[0].question
        same = ask(loaded, first)["builder"]["prompt"] == ask(pipe, first)["builder"]["prompt"]
        print(f"\nYAML round trip: {'the same messages' if same else 'OTHER MESSAGES'}")
    print(f"\n{len(questions) - wrong} of {len(questions)} answers right")
    return 1 if wrong or not same else 0


if __name__ == "__main__":
    raise SystemExit(run(main))
