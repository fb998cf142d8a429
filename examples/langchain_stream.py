"""Streaming with LangChain, offline: PhaseAwarePrompt -> ChatOpenAI(stream_usage=True).

The answer streams token by token from ``phaseaware serve-reference``; the server's usage
arrives on the stream's last chunk only when ``stream_usage=True`` is set, and
``PhaseAwareUsageCheck`` then compares its prompt token count with the plan. The example
exits 1 when the answer is wrong or the usage check did not run.

    PYTHONPATH=integrations/langchain python examples/langchain_stream.py [--profile FILE]
"""

from __future__ import annotations

import argparse
from contextlib import nullcontext

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
    from langchain_core.prompts import ChatPromptTemplate
    from langchain_openai import ChatOpenAI
    from langchain_phaseaware import PhaseAwarePrompt, PhaseAwareUsageCheck

    from phaseaware.tokenizers import load_tokenizer


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--profile", help="a reference-model profile (default: calibrate now)")
    parser.add_argument("--base-url", help="a running serve-reference (default: start one)")
    args = parser.parse_args(argv)

    corpus, questions = local_notes()
    question = questions[0]
    tokenizer = load_tokenizer("reference")
    template = ChatPromptTemplate.from_messages([("human", "{context}\n\n{question}")])
    place = PhaseAwarePrompt(
        template,
        tokenizer=tokenizer,
        chat_format="hf",
        profile=reference_profile(args.profile),
        budget_tokens=512,
    )
    checks = []
    usage = PhaseAwareUsageCheck(
        tokenizer=tokenizer, chat_format="hf", on_mismatch="raise", on_check=checks.append
    )
    documents = BM25Retriever(documents=corpus, k=5).invoke(question.question)
    prompt = place.invoke({"question": question.question, "documents": documents})
    server = nullcontext(args.base_url) if args.base_url else reference_server()
    with server as base_url:
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
