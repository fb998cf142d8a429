"""The framework adapters against a real vLLM (DeepSeek-V4 mode), through their public API.

LangChain: ``PhaseAwarePrompt`` | ``ChatOpenAI`` with ``PhaseAwareUsageCheck``. LlamaIndex:
``PhaseAwareSynthesizer`` with ``OpenAILike``. The client states the chat settings the plan
was made with (``ChatSettings().chat_template_kwargs``); the usage check then sees zero
drift. Left to the server's default (thinking on, effort "high") the same call drifts, and
the check says so.
"""

from __future__ import annotations

from typing import Any

import pytest

from phaseaware.chat import ChatSettings
from tests.support.vllm_server import VllmServer

TEXTS = [
    "The pump P-7 trips when inlet pressure falls below 1.8 bar.",
    "Module voltage below 3.1 V disables the module until service.",
    "The cafeteria opens at 7:30 on weekdays.",
]
QUESTION = "Below which voltage is a module disabled?"
KWARGS = ChatSettings().chat_template_kwargs("deepseek-v4")
COMMON: dict[str, Any] = {
    "tokenizer": "deepseek-v4",
    "chat_format": "deepseek-v4",
    "profile": "deepseek-v4-flash-base",
    "budget_tokens": 600,
}


def _langchain_chain(server: VllmServer, *, state_settings: bool) -> Any:
    pytest.importorskip("langchain_phaseaware")
    from langchain_core.prompts import ChatPromptTemplate
    from langchain_openai import ChatOpenAI
    from langchain_phaseaware import PhaseAwarePrompt

    prompt = ChatPromptTemplate.from_messages(
        [("system", "Answer from the notes.\n{context}"), ("human", "{question}")]
    )
    llm = ChatOpenAI(
        base_url=server.base_url,
        model=server.model,
        api_key="EMPTY",  # type: ignore[arg-type]
        max_tokens=1,
        temperature=0,
        extra_body={"chat_template_kwargs": KWARGS} if state_settings else None,
    )
    return PhaseAwarePrompt(prompt, **COMMON) | llm


def _documents() -> list[Any]:
    from langchain_core.documents import Document

    return [Document(page_content=t, metadata={"score": 1.0 - i / 10}) for i, t in enumerate(TEXTS)]


def test_langchain_prompt_with_stated_settings_has_zero_drift(vllm_v4: VllmServer) -> None:
    from langchain_phaseaware import PhaseAwareUsageCheck

    check = PhaseAwareUsageCheck(
        tokenizer="deepseek-v4", chat_format="deepseek-v4", offset=0, on_mismatch="raise"
    )
    chain = _langchain_chain(vllm_v4, state_settings=True)
    chain.invoke({"question": QUESTION, "documents": _documents()}, config={"callbacks": [check]})


def test_langchain_usage_check_reports_a_server_default(vllm_v4: VllmServer) -> None:
    from langchain_phaseaware import PhaseAwareUsageCheck

    from phaseaware.errors import PromptTokenDriftError

    check = PhaseAwareUsageCheck(
        tokenizer="deepseek-v4", chat_format="deepseek-v4", offset=0, on_mismatch="raise"
    )
    chain = _langchain_chain(vllm_v4, state_settings=False)
    with pytest.raises(PromptTokenDriftError):
        chain.invoke(
            {"question": QUESTION, "documents": _documents()}, config={"callbacks": [check]}
        )


def test_llama_index_synthesizer_with_stated_settings(vllm_v4: VllmServer) -> None:
    pytest.importorskip("llama_index.postprocessor.phaseaware")
    from llama_index.core.schema import NodeWithScore, TextNode
    from llama_index.llms.openai_like import OpenAILike
    from llama_index.postprocessor.phaseaware import PhaseAwareSynthesizer

    llm = OpenAILike(
        model=vllm_v4.model,
        api_base=vllm_v4.base_url,
        api_key="EMPTY",
        is_chat_model=True,
        max_tokens=1,
        temperature=0,
        additional_kwargs={"extra_body": {"chat_template_kwargs": KWARGS}},
    )
    synth = PhaseAwareSynthesizer(llm=llm, on_mismatch="raise", **COMMON)
    nodes = [
        NodeWithScore(node=TextNode(text=t, id_=f"n{i}"), score=1.0 - i / 10)
        for i, t in enumerate(TEXTS)
    ]
    response = synth.synthesize(
        QUESTION, nodes=synth.postprocessor().postprocess_nodes(nodes, query_str=QUESTION)
    )
    assert response.source_nodes
