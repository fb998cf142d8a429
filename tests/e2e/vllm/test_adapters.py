"""The framework adapters against a real vLLM (DeepSeek-V4 mode), through their public API.

LangChain: ``PhaseAwarePrompt`` | ``ChatOpenAI`` with ``PhaseAwareUsageCheck``, and
``create_agent`` with tools and ``PhaseAwareMiddleware``. LlamaIndex:
``PhaseAwareSynthesizer`` with ``OpenAILike``. Two ways to zero drift, usage check on
(``raise``): (i) the adapters state the chat settings the plan was made with (the client
passes nothing itself: the middleware and synthesizer put them on the request, the prompt
gives ``model_kwargs()`` to bind), and (ii) nothing is stated and the plan uses the server's
default from a ``probe-endpoint`` record (``state_settings=False``). Left to the server's
default without a record, the same call drifts, and the check says so. The record's served
model and fingerprint are checked on every response (a changed checkpoint warns).
"""

from __future__ import annotations

import warnings
from typing import Any

import pytest

from phaseaware.assembly.conversation import PrefixRewriteWarning
from phaseaware.chat import ChatSettings
from phaseaware.endpoints import EndpointRecord, probe_endpoint
from phaseaware.endpoints.usage import UsageCheck
from phaseaware.errors import PhaseawareWarning
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
    )
    placed = PhaseAwarePrompt(prompt, **COMMON)
    # the one-liner: the model states the settings the prompt was planned with
    return placed | (llm.bind(**placed.model_kwargs()) if state_settings else llm)


def _documents() -> list[Any]:
    from langchain_core.documents import Document

    return [Document(page_content=t, metadata={"score": 1.0 - i / 10}) for i, t in enumerate(TEXTS)]


def test_langchain_prompt_with_stated_settings_has_zero_drift(vllm_v4: VllmServer) -> None:
    from langchain_phaseaware import PhaseAwareUsageCheck

    check = PhaseAwareUsageCheck(
        tokenizer="deepseek-v4", chat_format="deepseek-v4", position_offset=0, on_mismatch="raise"
    )
    chain = _langchain_chain(vllm_v4, state_settings=True)
    chain.invoke({"question": QUESTION, "documents": _documents()}, config={"callbacks": [check]})


def test_langchain_usage_check_reports_a_server_default(vllm_v4: VllmServer) -> None:
    from langchain_phaseaware import PhaseAwareUsageCheck

    from phaseaware.errors import PromptTokenDriftError

    check = PhaseAwareUsageCheck(
        tokenizer="deepseek-v4", chat_format="deepseek-v4", position_offset=0, on_mismatch="raise"
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


# -- the adapters state the settings, or plan with the probed server default ---------------

SETTINGS = {
    "off": ChatSettings(),
    "max": ChatSettings(thinking=True, reasoning_effort="max"),
}


@pytest.fixture(scope="module")
def v4_record(vllm_v4: VllmServer, tmp_path_factory: pytest.TempPathFactory) -> EndpointRecord:
    record = probe_endpoint(
        base_url=vllm_v4.base_url, model=vllm_v4.model, tokenizer="deepseek-v4",
        chat_format="deepseek-v4", mode="exact", directory=tmp_path_factory.mktemp("records"),
    )  # fmt: skip
    assert record.server_default == {"thinking": True, "reasoning_effort": "high", "matched": True}
    assert record.served_model == vllm_v4.model and record.system_fingerprint
    return record


def _how(name: str, record: EndpointRecord) -> dict[str, Any]:
    """The adapter arguments of one way: explicit settings stated, or the server default."""
    if name == "server-default":
        return {"endpoint": record, "state_settings": False}
    return {"endpoint": record, "settings": SETTINGS[name]}


WAYS = ["off", "max", "server-default"]


def _plain_chat_openai(server: VllmServer, **extra: Any) -> Any:
    from langchain_openai import ChatOpenAI

    return ChatOpenAI(
        base_url=server.base_url, model=server.model, api_key="EMPTY",  # type: ignore[arg-type]
        max_tokens=1, temperature=0, **extra,
    )  # fmt: skip


@pytest.mark.parametrize("way", WAYS)
def test_langchain_prompt_states_its_settings(
    vllm_v4: VllmServer, v4_record: EndpointRecord, way: str
) -> None:
    pytest.importorskip("langchain_phaseaware")
    from langchain_core.prompts import ChatPromptTemplate
    from langchain_phaseaware import PhaseAwarePrompt, PhaseAwareUsageCheck

    how = _how(way, v4_record)
    template = ChatPromptTemplate.from_messages(
        [("system", "Answer from the notes.\n{context}"), ("human", "{question}")]
    )
    prompt = PhaseAwarePrompt(template, **{**COMMON, **how})
    assert bool(prompt.model_kwargs()) == (way != "server-default")
    check = PhaseAwareUsageCheck(
        tokenizer="deepseek-v4", chat_format="deepseek-v4", on_mismatch="raise", **how
    )
    checks: list[Any] = []
    check.on_check = checks.append
    chain = prompt | _plain_chat_openai(vllm_v4).bind(**prompt.model_kwargs())
    with warnings.catch_warnings():
        warnings.simplefilter("error", PhaseawareWarning)  # the identity check holds
        chain.invoke(
            {"question": QUESTION, "documents": _documents()}, config={"callbacks": [check]}
        )
    assert len(checks) == 1 and checks[0].drift == 0


def _agent_state() -> dict[str, Any]:
    """A conversation that ends in a tool result, so the first model call aligns it."""
    from langchain_core.messages import AIMessage, HumanMessage, ToolMessage

    call = {"name": "get_weather", "args": {"city": "Paris"}, "id": "call_1", "type": "tool_call"}
    return {
        "messages": [
            HumanMessage(content=QUESTION, id="h1"),
            AIMessage(content="", tool_calls=[call], id="a1"),
            ToolMessage(content="\n\n".join(TEXTS), tool_call_id="call_1", name="get_weather",
                        id="t1"),
        ]
    }  # fmt: skip


@pytest.mark.parametrize("way", WAYS)
def test_langchain_agent_middleware_states_its_settings(
    vllm_v4: VllmServer, v4_record: EndpointRecord, way: str
) -> None:
    pytest.importorskip("langchain.agents")
    from langchain.agents import create_agent
    from langchain_core.tools import tool
    from langchain_phaseaware import PhaseAwareMiddleware

    @tool
    def get_weather(city: str) -> str:
        """The current weather of a city."""
        return "clear"

    checks: list[UsageCheck] = []  # one per aligned call: made only after a tool result aligned
    middleware = PhaseAwareMiddleware(
        **{**COMMON, **_how(way, v4_record)}, check_usage="raise", on_check=checks.append
    )
    agent = create_agent(_plain_chat_openai(vllm_v4), tools=[get_weather], middleware=[middleware])
    with warnings.catch_warnings():
        warnings.simplefilter("error", PhaseawareWarning)
        state = agent.invoke(_agent_state())
    assert checks and all(c.ok for c in checks)  # the tool result was aligned, the usage checked
    assert all(c.count_only_reason for c in checks)  # a plain ChatOpenAI keeps no body: says so
    assert "phaseaware" in state["messages"][2].response_metadata


@pytest.mark.parametrize("way", WAYS)
def test_llama_index_synthesizer_states_its_settings(
    vllm_v4: VllmServer, v4_record: EndpointRecord, way: str
) -> None:
    pytest.importorskip("llama_index.postprocessor.phaseaware")
    from llama_index.core.schema import NodeWithScore, TextNode
    from llama_index.llms.openai_like import OpenAILike
    from llama_index.postprocessor.phaseaware import PhaseAwareSynthesizer

    llm = OpenAILike(
        model=vllm_v4.model, api_base=vllm_v4.base_url, api_key="EMPTY", is_chat_model=True,
        max_tokens=1, temperature=0,
    )  # fmt: skip
    synth = PhaseAwareSynthesizer(
        llm=llm, on_mismatch="raise", **{**COMMON, **_how(way, v4_record)}
    )
    nodes = [
        NodeWithScore(node=TextNode(text=t, id_=f"n{i}"), score=1.0 - i / 10)
        for i, t in enumerate(TEXTS)
    ]
    with warnings.catch_warnings():
        warnings.simplefilter("error", PhaseawareWarning)
        synth.synthesize(
            QUESTION, nodes=synth.postprocessor().postprocess_nodes(nodes, query_str=QUESTION)
        )
    assert synth.last_sent is not None and synth.last_sent.check is not None
    assert synth.last_sent.check.drift == 0


def test_a_changed_checkpoint_warns(vllm_v4: VllmServer, v4_record: EndpointRecord) -> None:
    pytest.importorskip("llama_index.postprocessor.phaseaware")
    import dataclasses

    from llama_index.core.schema import NodeWithScore, TextNode
    from llama_index.llms.openai_like import OpenAILike
    from llama_index.postprocessor.phaseaware import PhaseAwareSynthesizer

    moved = dataclasses.replace(v4_record, served_model="another-checkpoint")
    llm = OpenAILike(
        model=vllm_v4.model, api_base=vllm_v4.base_url, api_key="EMPTY", is_chat_model=True,
        max_tokens=1, temperature=0,
    )  # fmt: skip
    synth = PhaseAwareSynthesizer(llm=llm, on_mismatch="raise", endpoint=moved, **COMMON)
    nodes = [
        NodeWithScore(node=TextNode(text=t, id_=f"n{i}"), score=1.0) for i, t in enumerate(TEXTS)
    ]
    with pytest.warns(PhaseawareWarning, match="served checkpoint changed"):
        synth.synthesize(QUESTION, nodes=nodes)


# thinking with earlier reasoning kept: an appended tool result leaves the sent bytes alone
KEEP = ChatSettings(thinking=True, reasoning_effort="max", drop_thinking=False)


@pytest.mark.parametrize("way", ["off", "max-keep", "server-default"])
def test_llama_index_agent_llm_states_its_settings(
    vllm_v4: VllmServer, v4_record: EndpointRecord, way: str
) -> None:
    pytest.importorskip("llama_index.llms.phaseaware")
    from llama_index.core.base.llms.types import TextBlock, ToolCallBlock
    from llama_index.core.llms import ChatMessage
    from llama_index.llms.openai_like import OpenAILike
    from llama_index.llms.phaseaware import PhaseAwareAgentLLM

    inner = OpenAILike(
        model=vllm_v4.model, api_base=vllm_v4.base_url, api_key="EMPTY", is_chat_model=True,
        is_function_calling_model=True, max_tokens=1, temperature=0,
    )  # fmt: skip
    how = _how(way, v4_record) if way != "max-keep" else {"endpoint": v4_record, "settings": KEEP}
    llm = PhaseAwareAgentLLM(llm=inner, **{**COMMON, **how}, check_usage="raise")
    call = ToolCallBlock(tool_call_id="c0", tool_name="search", tool_kwargs={"q": "voltage"})
    messages = [
        ChatMessage(role="user", content=QUESTION),
        ChatMessage(role="assistant", blocks=[TextBlock(text=""), call]),
        ChatMessage(role="tool", content="\n\n".join(TEXTS), additional_kwargs={"tool_call_id": "c0"}),
    ]  # fmt: skip
    if way == "server-default":
        # the server's default drops earlier reasoning when the tool result arrives: the sent
        # prefix changes, so the step takes the full path (positions exact; only the server's
        # prefix cache misses) with one warning naming drop_thinking=False, and the usage
        # check (raise) still holds against the real server
        with pytest.warns(PrefixRewriteWarning, match="drop_thinking=False"):
            llm.chat(messages)
        assert llm.last_report is not None
        return
    with warnings.catch_warnings():
        warnings.simplefilter("error", PhaseawareWarning)
        llm.chat(messages)
    assert llm.last_report is not None  # aligned, and the usage check (raise) held
