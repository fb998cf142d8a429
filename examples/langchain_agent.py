"""An agent, offline: create_agent + PhaseAwareMiddleware + a BM25 retriever tool.

The model is ChatOpenAI (langchain-openai) talking to ``phaseaware serve-reference``,
started here as a subprocess on 127.0.0.1. The reference model cannot emit tool
calls, so the first step is scripted: the assistant's call of ``search_notes`` is
written into the history and the REAL tool runs on it; every model call after that
is the agent's, through the middleware, over HTTP. The middleware aligns the tool
result before the model call (append alignment: the conversation already sent keeps
its bytes) and stores the aligned message, with its placement report, in the state.
A follow-up question then shows the aligned bytes resent unchanged. It exits with status 1
when the answer differs from the expected one or the aligned bytes changed.

    python examples/langchain_agent.py [--profile FILE]   # after the README's LangChain install line
"""

from __future__ import annotations

import re

from example_cli import MODEL, example_parser, needs, preflight, reference_profile, run, served

preflight()  # a dead --base-url fails before the imports below

with needs("langchain"):
    from langchain.agents import create_agent
    from langchain_common import BM25Retriever, check_answer, local_notes
    from langchain_core.documents import Document
    from langchain_core.messages import AIMessage, HumanMessage, ToolMessage
    from langchain_core.tools import tool
    from langchain_openai import ChatOpenAI
    from langchain_phaseaware import PhaseAwareMiddleware
    from langchain_phaseaware.middleware import REPORT_KEY

    from phaseaware.tokenizers import load_tokenizer


def main(argv: list[str] | None = None) -> int:
    args = example_parser(__doc__).parse_args(argv)
    with served(args) as base_url:  # a given --base-url is checked first (3 s)
        return _run(args.profile, base_url)


def _run(profile: str | None, base_url: str) -> int:
    corpus, questions = local_notes()
    retriever = BM25Retriever(documents=corpus, k=5)

    @tool(response_format="content_and_artifact")
    def search_notes(query: str) -> tuple[str, list[Document]]:
        """Search the access-code notes."""
        documents = retriever.invoke(query)
        return "\n\n".join(d.page_content for d in documents), documents

    middleware = PhaseAwareMiddleware(
        tokenizer=load_tokenizer("reference"),
        chat_format="hf",
        profile=reference_profile(profile),
        budget_tokens=1024,
        tool_role="user",  # the reference chat template knows only user and assistant turns
        tool_schemas="not_rendered",  # nor tool schemas (the usage check confirms it)
        check_usage="raise",
        message_template="{context}\n\n{question}",  # the shape the reference model reads
    )
    question = questions[0]
    llm = ChatOpenAI(base_url=base_url, api_key="unused", model=MODEL, temperature=0, max_tokens=4)
    agent = create_agent(model=llm, tools=[search_notes], middleware=[middleware])
    call = {"name": "search_notes", "args": {"query": question.question}, "id": "call-1"}
    result = search_notes.invoke({**call, "type": "tool_call"})  # the scripted first step
    history = [HumanMessage(question.question), AIMessage("", tool_calls=[call]), result]
    state = agent.invoke({"messages": history})
    aligned = next(m for m in state["messages"] if isinstance(m, ToolMessage))
    report = aligned.response_metadata[REPORT_KEY]
    answer = state["messages"][-1].content
    right = check_answer(question.question, answer, question.answer)
    print(f"conversation {report['token_count']} tokens; the tool result was aligned:")
    print("  order  note        pad  key positions  residues  exp.acc")
    for p in report["placements"]:
        acc = p["expected_accuracy"]
        print(
            f"  {p['order']:5d}  {str(p['document_id']):10s} {p['padding_tokens']:4d}  "
            f"{','.join(map(str, p['key_token_positions'])):13s}  "
            f"{','.join(map(str, p['residues'])):8s}  {'-' if acc is None else f'{acc:.3f}'}"
        )
    # the follow-up asks for another fact of the notes already retrieved (the reference
    # model cannot call the tool again), so its answer is checked too
    name, code = _another_fact(result.artifact, asked=question.key_name)
    follow = f"What is the access code for {name} ?"
    state = agent.invoke({"messages": [*state["messages"], HumanMessage(follow)]})
    resent = next(m for m in state["messages"] if isinstance(m, ToolMessage))
    right_follow = check_answer(follow, state["messages"][-1].content, code)
    same = resent.content == aligned.content
    print(f"aligned tool result resent byte for byte: {same}")
    return 0 if right and right_follow and same else 1


def _another_fact(documents: list[Document], *, asked: str) -> tuple[str, str]:
    """A (name, code) stated in the retrieved notes, for another name than the one asked."""
    for doc in documents:
        for name, code in re.findall(r"access code for (\w+) is (\d+)", doc.page_content):
            if name != asked:
                return name, code
    raise SystemExit("the retrieved notes hold no second fact to ask about")


if __name__ == "__main__":
    raise SystemExit(run(main))
