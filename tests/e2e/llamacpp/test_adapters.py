"""Both framework adapters against the real llama.cpp server, through their public API.

LangChain: ``PhaseAwarePrompt`` | ``ChatOpenAI`` with ``PhaseAwareUsageCheck``
(``on_mismatch="raise"``); LlamaIndex: ``PhaseAwareSynthesizer`` with ``OpenAILike``
(``on_mismatch="raise"``). The ``hf`` format renders the GGUF's own template; zero drift
means the server counted exactly the tokens phaseaware planned. The LangChain model also
binds a tool on the Qwen2.5-template server; ``PhaseAwareUsageCheck`` plans the bound tool
into the ``hf`` render.
"""

from __future__ import annotations

from typing import Any

import pytest

from tests.e2e.llamacpp.conftest import record
from tests.e2e.llamacpp.test_tokens import DOCUMENTS, QUESTION, WEATHER_TOOL
from tests.support.llamacpp_server import LlamaCppServer


def _chat_openai(server: LlamaCppServer) -> Any:
    from langchain_openai import ChatOpenAI

    return ChatOpenAI(
        base_url=server.base_url, model=server.model, api_key="EMPTY",  # type: ignore[arg-type]
        max_tokens=1, temperature=0, max_retries=0,
    )  # fmt: skip


def test_langchain_prompt_and_chat_openai_have_zero_drift(llamacpp: LlamaCppServer) -> None:
    pytest.importorskip("langchain_phaseaware")
    from langchain_core.documents import Document
    from langchain_core.prompts import ChatPromptTemplate
    from langchain_phaseaware import PhaseAwarePrompt, PhaseAwareUsageCheck

    tokenizer = f"hf:{llamacpp.gguf}"
    prompt = ChatPromptTemplate.from_messages(
        [("system", "Answer from the notes.\n{context}"), ("human", "{question}")]
    )
    placed = PhaseAwarePrompt(
        prompt, tokenizer=tokenizer, chat_format="hf", profile=None, budget_tokens=800
    )
    checks: list[Any] = []
    check = PhaseAwareUsageCheck(
        tokenizer=tokenizer, chat_format="hf", position_offset=0, on_mismatch="raise",
        on_check=checks.append,
    )  # fmt: skip
    chain = placed | _chat_openai(llamacpp).bind(**placed.model_kwargs())
    docs = [
        Document(page_content=t, metadata={"score": 1 - i / 10}) for i, t in enumerate(DOCUMENTS)
    ]
    chain.invoke({"question": QUESTION, "documents": docs}, config={"callbacks": [check]})
    assert len(checks) == 1 and checks[0].ok
    record("LangChain PhaseAwarePrompt | ChatOpenAI: usage", checks[0].ok)


def test_langchain_bound_tool_has_zero_drift(llamacpp_tools: LlamaCppServer) -> None:
    pytest.importorskip("langchain_phaseaware")
    from langchain_core.messages import HumanMessage, SystemMessage
    from langchain_phaseaware import PhaseAwareUsageCheck

    tokenizer = f"hf:{llamacpp_tools.gguf}"
    # the check reads the bound tools from the call and plans them into the hf render
    checks: list[Any] = []
    check = PhaseAwareUsageCheck(
        tokenizer=tokenizer, chat_format="hf", position_offset=0, on_mismatch="raise",
        on_check=checks.append,
    )  # fmt: skip
    model = _chat_openai(llamacpp_tools).bind_tools([WEATHER_TOOL])
    model.invoke(
        [SystemMessage("Be brief."), HumanMessage("Weather in Oslo?")],
        config={"callbacks": [check]},
    )
    assert len(checks) == 1 and checks[0].ok
    record("LangChain ChatOpenAI.bind_tools: usage", checks[0].ok)


def test_llama_index_synthesizer_with_openai_like(llamacpp: LlamaCppServer) -> None:
    pytest.importorskip("llama_index.postprocessor.phaseaware")
    from llama_index.core.schema import NodeWithScore, TextNode
    from llama_index.llms.openai_like import OpenAILike
    from llama_index.postprocessor.phaseaware import PhaseAwareSynthesizer

    llm = OpenAILike(
        model=llamacpp.model, api_base=llamacpp.base_url, api_key="EMPTY", is_chat_model=True,
        max_tokens=1, temperature=0, max_retries=0,
    )  # fmt: skip
    synth = PhaseAwareSynthesizer(
        llm=llm, tokenizer=f"hf:{llamacpp.gguf}", chat_format="hf", budget_tokens=800,
        on_mismatch="raise",
    )  # fmt: skip
    nodes = [
        NodeWithScore(node=TextNode(text=t, id_=f"n{i}"), score=1.0 - i / 10)
        for i, t in enumerate(DOCUMENTS)
    ]
    response = synth.synthesize(
        QUESTION, nodes=synth.postprocessor().postprocess_nodes(nodes, query_str=QUESTION)
    )
    assert response.source_nodes
    record("LlamaIndex PhaseAwareSynthesizer | OpenAILike: usage", True)
