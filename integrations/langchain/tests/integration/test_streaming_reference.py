"""Streaming end to end over real HTTP (SSE) against the reference server.

``chain.stream`` / ``astream`` / ``astream_events`` through ``PhaseAwarePrompt`` and
``ChatOpenAI(stream_usage=True)``, and ``create_agent`` with ``PhaseAwareMiddleware``
streamed: the answer arrives in chunks and the usage check runs on the final usage
chunk (``stream_options.include_usage``), with zero drift. Until ``serve-reference``
streams, a stand-in SSE front replays its answers (``tests/support/sse_front.py``).
"""

from __future__ import annotations

import asyncio
from collections.abc import Iterator
from typing import Any

import pytest
from langchain_core.documents import Document
from langchain_core.messages import AIMessage, AIMessageChunk, HumanMessage, ToolMessage
from langchain_core.prompts import ChatPromptTemplate
from langchain_phaseaware import PhaseAwareMiddleware, PhaseAwarePrompt, PhaseAwareUsageCheck

from phaseaware.demo.rag_questions import make_questions
from phaseaware.tokenizers import load_tokenizer

pytestmark = pytest.mark.slow

TEMPLATE = ChatPromptTemplate.from_messages([("human", "{context}\n\n{question}")])


@pytest.fixture(scope="module")
def streaming(served: Any) -> Iterator[Any]:
    """``serve-reference`` itself: it streams (SSE, usage chunk included)."""
    yield served


def _model(served: Any) -> Any:
    import httpx
    from langchain_openai import ChatOpenAI

    # an async client of its own: langchain-openai caches its default async httpx client
    # per (base_url, timeout) process-wide, and a client bound to an event loop that an
    # earlier test's asyncio.run closed fails with "Event loop is closed"
    return ChatOpenAI(
        base_url=served.base_url, api_key="unused", model=served.model_name, temperature=0,
        max_tokens=4, max_retries=0, timeout=60, stream_usage=True,
        http_async_client=httpx.AsyncClient(timeout=60),
    )  # fmt: skip


def _question() -> Any:
    return make_questions(count=1, seed=50_000, chunks_per_question=4, max_filler_sentences=4)[0]


def _inputs(q: Any) -> dict[str, Any]:
    docs = [Document(page_content=c.text, metadata={"score": c.score}) for c in q.chunks]
    return {"question": q.question, "documents": docs}


def test_chain_stream_astream_and_events_check_usage(streaming, reference_profile):
    tok = load_tokenizer("reference")
    place = PhaseAwarePrompt(
        TEMPLATE, tokenizer=tok, chat_format="hf", profile=reference_profile, budget_tokens=512
    )
    checks: list[Any] = []
    usage = PhaseAwareUsageCheck(
        tokenizer=tok, chat_format="hf", on_mismatch="raise", on_check=checks.append
    )
    chain = place | _model(streaming).with_config(callbacks=[usage])
    inputs = _inputs(_question())
    planned = place.with_report().invoke(inputs)["report"]["token_count"]

    chunks = list(chain.stream(inputs))
    assert chunks and all(isinstance(c, AIMessageChunk) for c in chunks)
    total = sum(chunks[1:], chunks[0])
    assert total.usage_metadata is not None and total.usage_metadata["input_tokens"] == planned

    async def run() -> tuple[list[Any], list[Any]]:
        streamed = [c async for c in chain.astream(inputs)]
        events = [e async for e in chain.astream_events(inputs, version="v2")]
        return streamed, events

    streamed, events = asyncio.run(run())
    assert streamed and "".join(str(c.content) for c in streamed) == "".join(
        str(c.content) for c in chunks
    )
    kinds = {e["event"] for e in events}
    assert {"on_prompt_end", "on_chat_model_stream", "on_chat_model_end"} <= kinds
    assert len(checks) == 3 and all(c.ok and c.planned_tokens == planned for c in checks)


def test_agent_streams_with_the_middleware(streaming, reference_profile):
    from langchain.agents import create_agent
    from langchain_core.tools import tool

    q = _question()
    documents = [Document(page_content=c.text, metadata={"score": c.score}) for c in q.chunks]

    @tool(response_format="content_and_artifact")
    def search_notes(query: str) -> tuple[str, list[Document]]:
        """Search the access-code notes."""
        return "\n\n".join(d.page_content for d in documents), documents

    middleware = PhaseAwareMiddleware(
        tokenizer=load_tokenizer("reference"), chat_format="hf", profile=reference_profile,
        budget_tokens=512, tool_role="user", check_usage="raise", tool_schemas="not_rendered",
    )  # fmt: skip
    agent = create_agent(model=_model(streaming), tools=[search_notes], middleware=[middleware])
    call = {"name": "search_notes", "args": {"query": q.question}, "id": "call-1"}
    tool_message = search_notes.invoke({**call, "type": "tool_call"})
    history = [HumanMessage(q.question), AIMessage(content="", tool_calls=[call]), tool_message]

    tokens = [m for m, _ in agent.stream({"messages": history}, stream_mode="messages")]
    assert any(isinstance(m, AIMessageChunk) for m in tokens)

    async def run() -> Any:
        return [e async for e in agent.astream({"messages": history}, stream_mode="values")]

    states = asyncio.run(run())
    aligned = next(m for m in states[-1]["messages"] if isinstance(m, ToolMessage))
    assert "phaseaware" in aligned.response_metadata  # aligned, usage checked (raise)
    assert isinstance(states[-1]["messages"][-1], AIMessage)
