"""create_agent + PhaseAwareMiddleware over real HTTP to the reference server.

The reference model never emits tool calls, so the first step is scripted: the
assistant's tool call is written into the history and the REAL retriever tool runs
on it (a ``content_and_artifact`` tool returning ``Document`` objects). Every model
call after that is ChatOpenAI talking to the reference server through the agent.
"""

from __future__ import annotations

import asyncio
from typing import Any

import pytest
from langchain_core.documents import Document
from langchain_core.messages import AIMessage, HumanMessage, ToolMessage
from langchain_core.tools import tool

from phaseaware.demo.rag_questions import make_questions
from phaseaware.demo.run import CHUNKS_PER_QUESTION, MAX_FILLER_SENTENCES
from phaseaware.tokenizers import load_tokenizer

pytest.importorskip("langchain.agents")

from langchain.agents import create_agent  # noqa: E402
from langchain_phaseaware import PhaseAwareMiddleware  # noqa: E402
from langchain_phaseaware.middleware import REPORT_KEY  # noqa: E402

pytestmark = pytest.mark.slow


def _retriever_tool(documents: list[Document]) -> Any:
    @tool(response_format="content_and_artifact")
    def search_notes(query: str) -> tuple[str, list[Document]]:
        """Search the access-code notes."""
        return "\n\n".join(d.page_content for d in documents), documents

    return search_notes


def test_agent_aligns_the_tool_result_and_keeps_sent_bytes(served, chat_model, reference_profile):
    tokenizer = load_tokenizer("reference")
    q = make_questions(
        count=1,
        seed=40_000,
        chunks_per_question=CHUNKS_PER_QUESTION,
        max_filler_sentences=MAX_FILLER_SENTENCES,
    )[0]
    documents = [
        Document(page_content=c.text, metadata={"score": c.score, "evidence": list(c.evidence)})
        for c in q.chunks
    ]
    originals = [d.model_copy(deep=True) for d in documents]
    search = _retriever_tool(documents)
    middleware = PhaseAwareMiddleware(
        tokenizer=tokenizer,
        chat_format="hf",
        profile=reference_profile,
        budget_tokens=768,
        tool_role="user",  # the reference chat template has no tool role
        tool_schemas="not_rendered",  # nor tool schemas: the usage check confirms it
        check_usage="raise",
        message_template="{context}\n\n{question}",
    )
    agent = create_agent(model=chat_model, tools=[search], middleware=[middleware])
    call = {"name": "search_notes", "args": {"query": q.question}, "id": "call-1"}
    tool_message = search.invoke({**call, "type": "tool_call"})  # the real tool runs
    assert isinstance(tool_message, ToolMessage) and tool_message.artifact == documents
    history = [HumanMessage(q.question), AIMessage(content="", tool_calls=[call]), tool_message]

    before = len(served.log)
    state = agent.invoke({"messages": history})
    first = served.log[before:]
    assert len(first) == 1
    aligned = next(m for m in state["messages"] if isinstance(m, ToolMessage))
    report = aligned.response_metadata[REPORT_KEY]
    assert aligned.id == tool_message.id and aligned.content != tool_message.content
    assert tool_message.content == "\n\n".join(d.page_content for d in documents)  # untouched
    assert documents == originals
    received = first[0]
    assert received.messages[-1] == {"role": "user", "content": aligned.content}
    # re-tokenize what the server received: every key token is where the report says
    rendered = served.engine.render_chat(received.messages)
    measured = tokenizer.tokenize(rendered)
    assert list(received.ids) == list(measured.ids) and report["token_count"] == len(measured)
    for placement in report["placements"]:
        for pos, char in zip(
            placement["key_token_positions"], placement["key_char_offsets"], strict=True
        ):
            assert measured.token_at_char(char) == pos
        source = q.chunks[placement["document_index"]]
        if source.evidence:
            key = tokenizer.decode([received.ids[placement["key_token_positions"][0]]])
            assert key.strip() == source.evidence[0].split()[0]
    assert isinstance(state["messages"][-1], AIMessage)
    assert aligned.content.endswith("\n\n" + q.question)

    # A follow-up turn resends the aligned bytes; nothing is aligned again.
    follow = [*state["messages"], HumanMessage("What is the access code for " + q.key_name + " ?")]
    agent.invoke({"messages": follow})
    second = served.log[before + 1 :]
    assert len(second) == 1
    assert second[0].messages[: len(received.messages)] == received.messages
    assert list(second[0].ids[: len(received.ids)]) == list(received.ids)


def test_agent_async_path_aligns_too(served, chat_model, reference_profile):
    asyncio.run(_async_agent(chat_model, reference_profile))


async def _async_agent(chat_model, reference_profile):
    tokenizer = load_tokenizer("reference")
    q = make_questions(count=1, seed=40_001, chunks_per_question=3, max_filler_sentences=2)[0]
    documents = [Document(page_content=c.text, metadata={"score": c.score}) for c in q.chunks]
    search = _retriever_tool(documents)
    agent = create_agent(
        model=chat_model,
        tools=[search],
        middleware=[
            PhaseAwareMiddleware(
                tokenizer=tokenizer, chat_format="hf", profile=reference_profile,
                budget_tokens=512, tool_role="user", check_usage="raise",
                tool_schemas="not_rendered",
            )
        ],
    )  # fmt: skip
    call = {"name": "search_notes", "args": {"query": q.question}, "id": "call-9"}
    tool_message = await search.ainvoke({**call, "type": "tool_call"})
    state = await agent.ainvoke(
        {
            "messages": [
                HumanMessage(q.question),
                AIMessage(content="", tool_calls=[call]),
                tool_message,
            ]
        }
    )
    aligned = next(m for m in state["messages"] if isinstance(m, ToolMessage))
    assert REPORT_KEY in aligned.response_metadata
    assert len(aligned.response_metadata[REPORT_KEY]["placements"]) == len(documents)
