"""Streaming with LangChain, offline: PhaseAwarePrompt -> ChatOpenAI(stream_usage=True).

The answer streams token by token from ``phaseaware serve-reference``; the server's usage
arrives on the stream's last chunk only when ``stream_usage=True`` is set, and
``PhaseAwareUsageCheck`` then compares its prompt token count with the plan. The example
exits 1 when the answer is wrong or the usage check did not run.

    python examples/langchain_stream.py [--profile FILE]   # after the README's LangChain install line
"""

from __future__ import annotations

from example_cli import MODEL, example_parser, needs, preflight, reference_profile, run, served

preflight()  # a dead --base-url fails before the imports below

with needs("langchain"):
    from langchain_common import BM25Retriever, check_answer, local_notes
    from langchain_core.prompts import ChatPromptTemplate
    from langchain_openai import ChatOpenAI
    from langchain_phaseaware import PhaseAwarePrompt, PhaseAwareUsageCheck

    from phaseaware.tokenizers import load_tokenizer


def main(argv: list[str] | None = None) -> int:
    args = example_parser(__doc__).parse_args(argv)
    with served(args) as base_url:  # a given --base-url is checked first (3 s)
        return _run(args.profile, base_url)


def _run(profile: str | None, base_url: str) -> int:
    corpus, questions = local_notes()
    question = questions[0]
    tokenizer = load_tokenizer("reference")
    template = ChatPromptTemplate.from_messages([("human", "{context}\n\n{question}")])
    place = PhaseAwarePrompt(
        template,
        tokenizer=tokenizer,
        chat_format="hf",
        profile=reference_profile(profile),
        budget_tokens=512,
    )
    checks = []
    usage = PhaseAwareUsageCheck(
        tokenizer=tokenizer, chat_format="hf", on_mismatch="raise", on_check=checks.append
    )
    documents = BM25Retriever(documents=corpus, k=5).invoke(question.question)
    prompt = place.invoke({"question": question.question, "documents": documents})
    llm = ChatOpenAI(
        base_url=base_url,
        api_key="unused",
        model=MODEL,
        temperature=0,
        max_tokens=4,
        stream_usage=True,  # without it the stream carries no usage to check
    )
    pieces = []
    print("streamed: ", end="", flush=True)
    for chunk in llm.stream(prompt, config={"callbacks": [usage]}):
        pieces.append(str(chunk.content))
        print(repr(chunk.content), end=" ", flush=True)
    print()
    right = check_answer(question.question, "".join(pieces), question.answer)
    if not checks:
        print("usage check: no usage arrived (is stream_usage=True set?)")
        return 1
    check = checks[-1]
    print(f"usage check: planned {check.planned_tokens} tokens, server counted "
          f"{check.reported_tokens}")  # fmt: skip
    return 0 if right else 1


if __name__ == "__main__":
    raise SystemExit(run(main))
