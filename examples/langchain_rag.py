"""LCEL RAG, offline: local notes -> BM25 -> PhaseAwarePrompt -> ChatOpenAI -> answer.

ChatOpenAI (langchain-openai) talks to ``phaseaware serve-reference``, started here as a
subprocess on 127.0.0.1 (a free port). For each question the script prints the answer
and where every retrieved note's key token landed (prompt position, residue mod 8,
the profile's expected accuracy there); a callback checks the server's
``usage.prompt_tokens`` against the planned count. It exits with status 1 when an
answer differs from the expected one.

    python examples/langchain_rag.py [--profile FILE]   # after the README's LangChain install line
    python examples/langchain_rag.py --base-url http://127.0.0.1:8000/v1   # a running server
"""

from __future__ import annotations

from operator import itemgetter

from example_cli import MODEL, example_parser, needs, preflight, reference_profile, run, served

preflight()  # a dead --base-url fails before the imports below

with needs("langchain"):
    from langchain_common import BM25Retriever, check_answer, local_notes
    from langchain_core.output_parsers import StrOutputParser
    from langchain_core.prompts import ChatPromptTemplate
    from langchain_core.runnables import RunnablePassthrough
    from langchain_openai import ChatOpenAI
    from langchain_phaseaware import PhaseAwarePrompt, PhaseAwareUsageCheck

    from phaseaware.tokenizers import load_tokenizer


def main(argv: list[str] | None = None) -> int:
    parser = example_parser(__doc__)
    parser.add_argument("--questions", type=int, default=4, help="questions to ask (default 4)")
    args = parser.parse_args(argv)

    wrong = 0
    with served(args) as base_url:  # a given --base-url is checked first (3 s)
        corpus, questions = local_notes()
        retriever = BM25Retriever(documents=corpus, k=5)
        tokenizer = load_tokenizer("reference")
        profile = reference_profile(args.profile)
        template = ChatPromptTemplate.from_messages([("human", "{context}\n\n{question}")])
        prompt = PhaseAwarePrompt(
            template, tokenizer=tokenizer, chat_format="hf", profile=profile, budget_tokens=512
        )
        check = PhaseAwareUsageCheck(tokenizer=tokenizer, chat_format="hf", on_mismatch="raise")
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
