"""LCEL RAG, offline: local notes -> BM25 -> PhaseAwarePrompt -> ChatOpenAI -> answer.

ChatOpenAI (langchain-openai) talks to ``phaseaware serve-reference``, started here as a
subprocess on 127.0.0.1 (a free port). For each question the script prints the answer
and where every retrieved note's key token landed (prompt position, residue mod 8,
the profile's expected accuracy there); a callback checks the server's
``usage.prompt_tokens`` against the planned count. It exits with status 1 when an
answer differs from the expected one.

    PYTHONPATH=integrations/langchain python examples/langchain_rag.py [--profile FILE]
    python examples/langchain_rag.py --base-url http://127.0.0.1:8000/v1   # a running server
"""

from __future__ import annotations

import argparse
from contextlib import nullcontext
from operator import itemgetter

from example_cli import needs, run

with needs():
    from langchain_common import (
        MODEL,
        BM25Retriever,
        check_answer,
        local_notes,
        reference_profile,
        reference_server,
    )
    from langchain_core.output_parsers import StrOutputParser
    from langchain_core.prompts import ChatPromptTemplate
    from langchain_core.runnables import RunnablePassthrough
    from langchain_openai import ChatOpenAI
    from langchain_phaseaware import PhaseAwarePrompt, PhaseAwareUsageCheck

    from phaseaware.tokenizers import load_tokenizer


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--profile", help="a reference-model profile (default: calibrate now)")
    parser.add_argument("--questions", type=int, default=4)
    parser.add_argument("--base-url", help="a running serve-reference (default: start one)")
    args = parser.parse_args(argv)

    corpus, questions = local_notes()
    retriever = BM25Retriever(documents=corpus, k=5)
    tokenizer = load_tokenizer("reference")
    profile = reference_profile(args.profile)
    template = ChatPromptTemplate.from_messages([("human", "{context}\n\n{question}")])
    prompt = PhaseAwarePrompt(
        template, tokenizer=tokenizer, chat_format="hf", profile=profile, budget_tokens=512
    )
    check = PhaseAwareUsageCheck(tokenizer=tokenizer, chat_format="hf", on_mismatch="raise")
    wrong = 0
    server = nullcontext(args.base_url) if args.base_url else reference_server()
    with server as base_url:
        llm = ChatOpenAI(
            base_url=base_url, api_key="unused", model=MODEL, temperature=0, max_tokens=4
        )
        chain = (
            {"documents": retriever, "question": RunnablePassthrough()}
            | prompt.with_report()
            | {
                "answer": itemgetter("prompt") | llm | StrOutputParser(),
                "report": itemgetter("report"),
            }
        )
        for q in questions[: args.questions]:
            out = chain.invoke(q.question, config={"callbacks": [check]})
            report = out["report"]
            wrong += not check_answer(q.question, out["answer"], q.answer)
            print(f"prompt {report['token_count']} tokens, usage.prompt_tokens checked")
            print("  order  note        pad  key positions  residues  exp.acc")
            for p in report["placements"]:
                acc = p["expected_accuracy"]
                print(
                    f"  {p['order']:5d}  {p['document_id']:10s} {p['padding_tokens']:4d}  "
                    f"{','.join(map(str, p['key_token_positions'])):13s}  "
                    f"{','.join(map(str, p['residues'])):8s}  "
                    f"{'-' if acc is None else f'{acc:.3f}'}"
                )
            print(
                f"expected accuracy: retrieval order {report['naive_expected_accuracy']:.3f} "
                f"-> phase-aware {report['expected_accuracy']:.3f}"
            )
    print(f"\n{args.questions - wrong} of {args.questions} answers right")
    return 1 if wrong else 0


if __name__ == "__main__":
    raise SystemExit(run(main))
