"""A LlamaIndex FunctionAgent whose tool result is aligned: PhaseAwareAgentLLM, offline.

The agent's LLM is LlamaIndex's ``OpenAILike`` wrapped in ``PhaseAwareAgentLLM``, talking
over HTTP to ``phaseaware serve-reference`` (started here on 127.0.0.1, or ``--base-url``).
The reference model cannot emit tool calls, so the first step is scripted: the assistant's
call of ``search_notes`` is written into the history and the REAL tool runs on it; every
model call after that is the agent's, through ``PhaseAwareAgentLLM``, over HTTP. The
tool result is aligned before the call (append alignment: the conversation already sent
keeps its bytes; ``tool_role="user"``: the reference chat template knows only user and
assistant turns). A follow-up question then shows the aligned bytes resent unchanged, as
the server received them. It exits with status 1 when an answer differs from the
expected one or the aligned bytes changed.

    python examples/llama_index_agent.py [--profile FILE]   # after the README's LlamaIndex line
"""

from __future__ import annotations

import asyncio
import json
from typing import Any

from example_cli import MODEL, example_parser, needs, preflight, reference_profile, served
from example_cli import run as run_example

preflight()  # a dead --base-url fails before the imports below

with needs("llama-index"):
    import httpx
    from llama_index.core.agent.workflow import FunctionAgent
    from llama_index.core.base.llms.types import ChatMessage, ToolCallBlock
    from llama_index.core.schema import TextNode
    from llama_index.llms.openai_like import OpenAILike
    from llama_index.llms.phaseaware import NodeRegistry, PhaseAwareAgentLLM, retriever_tool
    from llama_index_rag import DOCUMENTS, EXPECTED, BM25Retriever

    from phaseaware.tokenizers import load_tokenizer

QUESTION = "What is the access code for Mina ?"
FOLLOW_UP = "What is the access code for Umar ?"  # in the notes the search returned


def main(argv: list[str] | None = None) -> int:
    args = example_parser(__doc__).parse_args(argv)
    with served(args) as base_url:  # a given --base-url is checked first (3 s)
        return asyncio.run(_run(base_url, reference_profile(args.profile)))


async def _run(base_url: str, profile: Any) -> int:
    nodes = [TextNode(text=text, id_=name) for name, text in DOCUMENTS.items()]
    registry = NodeRegistry()
    tool = retriever_tool(
        BM25Retriever(nodes), registry, name="search_notes", description="Search the notes."
    )
    bodies: list[dict[str, Any]] = []  # what the server received, request by request

    async def record(request: httpx.Request) -> None:
        bodies.append(json.loads(request.content))

    inner = OpenAILike(
        model=MODEL, api_base=base_url, api_key="unused", is_chat_model=True,
        is_function_calling_model=True, max_tokens=4, temperature=0.0, max_retries=0,
        async_http_client=httpx.AsyncClient(event_hooks={"request": [record]}),
    )  # fmt: skip
    llm = PhaseAwareAgentLLM(
        llm=inner, tokenizer=load_tokenizer("reference"), chat_format="hf", profile=profile,
        budget_tokens=1024, registry=registry, check_usage="raise",
        tool_role="user",  # the reference chat template knows only user and assistant turns
        tool_schemas="not_rendered",  # nor tool schemas (the usage check confirms it)
        message_template="{context}\n\n{question}",  # the shape the reference model reads
    )  # fmt: skip
    agent = FunctionAgent(tools=[tool], llm=llm, streaming=False)
    call = ToolCallBlock(
        tool_call_id="call-1", tool_name="search_notes", tool_kwargs={"query": QUESTION}
    )
    found = tool.call(query=QUESTION)  # the scripted first step: the real tool runs
    history = [
        ChatMessage(role="user", content=QUESTION),
        ChatMessage(role="assistant", blocks=[call]),
        ChatMessage(
            role="tool",
            content=found.content,
            additional_kwargs={"tool_call_id": "call-1", "name": "search_notes"},
        ),
    ]
    answer = str(await agent.run(chat_history=history)).strip()
    right = _check(QUESTION, answer)
    report = llm.report("call-1") or {}
    print(f"conversation {report.get('token_count')} tokens; the tool result was aligned:")
    print("  order  note           pad  key positions  residues  exp.acc")
    for p in report.get("placements", []):
        acc = p["expected_accuracy"]
        print(
            f"  {p['order']:5d}  {str(p['document_id']):14s} {p['padding_tokens']:4d}  "
            f"{','.join(map(str, p['key_token_positions'])):13s}  "
            f"{','.join(map(str, p['residues'])):8s}  {'-' if acc is None else f'{acc:.3f}'}"
        )
    history = [*history, ChatMessage(role="assistant", content=answer)]
    follow = str(await agent.run(user_msg=FOLLOW_UP, chat_history=history)).strip()
    right_follow = _check(FOLLOW_UP, follow)
    first, second = bodies[0]["messages"], bodies[-1]["messages"]
    same = second[: len(first)] == first  # the aligned tool result, resent byte for byte
    print(f"{len(bodies)} requests; aligned tool result resent byte for byte: {same}")
    return 0 if right and right_follow and same and report else 1


def _check(question: str, answer: str) -> bool:
    expected = EXPECTED[question]
    ok = answer == expected
    print(f"\n{question}  ->  {answer!r}  (expected {expected}: {'OK' if ok else 'WRONG'})")
    return ok


if __name__ == "__main__":
    raise SystemExit(run_example(main))
