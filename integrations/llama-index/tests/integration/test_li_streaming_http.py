"""Streaming end to end over real HTTP (SSE): ``phaseaware_query_engine(streaming=True)``
and ``PhaseAwareSynthesizer(streaming=True)`` with ``OpenAILike``, sync and async; the
usage check runs on the final usage chunk (``stream_options.include_usage``), against
``serve-reference`` itself (it streams SSE in the OpenAI chunk format)."""

from __future__ import annotations

import asyncio

import pytest
from llama_index.core import PromptTemplate
from llama_index.core.base.response.schema import AsyncStreamingResponse, StreamingResponse
from llama_index.core.query_engine import RetrieverQueryEngine
from llama_index.postprocessor.phaseaware import PhaseAwareSynthesizer, phaseaware_query_engine

from phaseaware.demo.rag_questions import make_questions

pytestmark = pytest.mark.slow

QA = PromptTemplate("{context_str}\n\n{query_str}")


@pytest.fixture(scope="module")
def streaming_llm(served):
    """``OpenAILike`` on ``serve-reference``, streaming with a final usage chunk."""
    from llama_index.llms.openai_like import OpenAILike

    server, engine = served
    yield OpenAILike(
        model=engine.model_name, api_base=server.base_url, api_key="x", is_chat_model=True,
        max_tokens=4, temperature=0.0, context_window=1024, max_retries=0, timeout=60,
        additional_kwargs={"stream_options": {"include_usage": True}},
    )  # fmt: skip


@pytest.fixture(scope="module")
def question():
    return make_questions(count=1, seed=4343, chunks_per_question=4, max_filler_sentences=4)[0]


@pytest.mark.parametrize("mode", ["sync", "async"])
def test_query_engine_streams_and_checks_usage(
    streaming_llm, question, reference_profile_path, retriever_for, mode
):
    engine = phaseaware_query_engine(
        retriever_for(question.chunks), llm=streaming_llm, tokenizer="reference",
        chat_format="hf", profile=str(reference_profile_path), budget_tokens=512,
        text_qa_template=QA, on_mismatch="raise", streaming=True,
    )  # fmt: skip
    if mode == "sync":
        response = engine.query(question.question)
        assert isinstance(response, StreamingResponse)
        text = "".join(response.response_gen)
    else:

        async def run():
            response = await engine.aquery(question.question)
            assert isinstance(response, AsyncStreamingResponse)
            return response, "".join([t async for t in response.async_response_gen()])

        response, text = asyncio.run(run())
    assert text
    sent = response.metadata["phaseaware"]
    assert sent.check is not None and sent.check.ok and not sent.replanned
    assert sent.check.reported_tokens == sent.token_count


def test_from_args_with_the_synthesizer_streams(
    streaming_llm, question, reference_profile_path, retriever_for
):
    synth = PhaseAwareSynthesizer(
        llm=streaming_llm, tokenizer="reference", chat_format="hf",
        profile=str(reference_profile_path), budget_tokens=512, text_qa_template=QA,
        on_mismatch="raise", streaming=True,
    )  # fmt: skip
    engine = RetrieverQueryEngine.from_args(
        retriever_for(question.chunks), llm=streaming_llm, response_synthesizer=synth,
        node_postprocessors=[synth.postprocessor()], streaming=True,
    )  # fmt: skip
    response = engine.query(question.question)
    assert isinstance(response, StreamingResponse)
    assert "".join(response.response_gen)
    assert response.metadata["phaseaware"].check.ok
