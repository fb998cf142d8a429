"""PhaseAwareAgentLLM.align without a server: pure, replays what it sent, renders tools."""

from __future__ import annotations

import pytest

pytest.importorskip("llama_index.llms.openai_like")

from llama_index.core.base.llms.types import TextBlock, ToolCallBlock  # noqa: E402
from llama_index.core.llms import ChatMessage  # noqa: E402
from llama_index.core.schema import NodeWithScore, TextNode  # noqa: E402
from llama_index.llms.openai_like import OpenAILike  # noqa: E402
from llama_index.llms.phaseaware.base import (  # noqa: E402
    NodeRegistry,
    PhaseAwareAgentLLM,
    message_dict,
    model_view,
)

from phaseaware.integrate import UnsupportedSettingError  # noqa: E402

DOCS = [
    "The harbor ledger lists amber crates in the valley. The code of vault V1 is 4417-C.",
    "Timber and copper cable are held by the north gate. The code of vault W2 is 9082-A.",
]


def _llm(registry: NodeRegistry, **kwargs) -> PhaseAwareAgentLLM:
    inner = OpenAILike(model="m", api_base="http://127.0.0.1:9/v1", api_key="x",
                       is_chat_model=True, is_function_calling_model=True)  # fmt: skip
    return PhaseAwareAgentLLM(
        llm=inner, tokenizer="deepseek-v4", chat_format="deepseek-v4",
        profile="deepseek-v4-flash-base", budget_tokens=8000, registry=registry, **kwargs,
    )  # fmt: skip


def _history(n: int) -> list[ChatMessage]:
    messages = [ChatMessage(role="user", content="What is the code of vault V1?")]
    for k in range(n):
        call = ToolCallBlock(tool_call_id=f"c{k}", tool_name="search", tool_kwargs={"q": "V1"})
        messages += [
            ChatMessage(role="assistant", blocks=[TextBlock(text=""), call]),
            ChatMessage(role="tool", content="\n\n".join(DOCS), additional_kwargs={"tool_call_id": f"c{k}"}),
        ]  # fmt: skip
    return messages


def test_message_dict_reads_tool_calls_and_ids():
    messages = _history(1)
    assert message_dict(messages[1])["tool_calls"][0]["function"] == {
        "name": "search",
        "arguments": '{"q": "V1"}',
    }
    assert message_dict(messages[2])["tool_call_id"] == "c0"


def test_tool_role_user_shows_tool_results_as_user_messages():
    """As LangChain's middleware: the model sees a tool result as a user turn and the
    tool-calling assistant turn as its text; without tool_role nothing changes."""
    messages = _history(1)
    assert model_view(messages, "tool") == messages
    view = model_view(messages, "user")
    assert [str(m.role.value) for m in view] == ["user", "assistant", "user"]
    assert view[2].content == messages[2].content and not view[1].blocks[0].text
    assert all(not isinstance(b, ToolCallBlock) for m in view for b in m.blocks)
    assert messages[2].role.value == "tool"  # the caller's messages are not changed
    llm = _llm(NodeRegistry(), tool_role="user", tool_schemas="not_rendered")
    sent, result, _ = llm._send(messages, {})
    assert result is not None and [str(m.role.value) for m in sent] == ["user", "assistant", "user"]
    assert sent[2].content == result.messages[-1]["content"]  # the planned message, sent


def test_align_is_pure_uses_registered_nodes_and_replays_what_it_sent():
    registry = NodeRegistry()
    nodes = [NodeWithScore(node=TextNode(text=d, id_=f"n{i}", metadata={"evidence": [c]}), score=s)
             for i, (d, c, s) in enumerate(zip(DOCS, ["4417-C", "9082-A"], [0.9, 0.2], strict=True))]  # fmt: skip
    registry.put("\n\n".join(DOCS), nodes)
    llm = _llm(registry)
    first = _history(1)
    before = [m.model_dump() for m in first]
    sent, result = llm.align(first)
    assert [m.model_dump() for m in first] == before  # the caller's messages are untouched
    assert result is not None and result.append_path in ("incremental", "full")
    assert len(result.placements) == 2
    report = sent[-1].additional_kwargs["phaseaware"]  # on the tool message sent
    assert llm.report("c0") == report
    top = min(report["placements"], key=lambda p: p["rank"])
    assert top["expected_accuracy"] is not None
    aligned = sent[-1].content
    # the next step: the same tool message (original text) is replayed as sent, a new one aligned
    second = [*_history(2)]
    sent2, result2 = llm.align(second)
    assert sent2[2].content == aligned
    assert result2 is not None and result2.prompt.startswith(result.prompt)
    assert result2.append_path == "incremental"
    # what the server's prefix cache can reuse, reported in the placement report
    assert llm.last_report["unchanged_sent_tokens"] == result2.unchanged_sent_tokens
    assert llm.last_report["unchanged_prefix_tokens"] == result2.unchanged_prefix_tokens
    assert 0 < result2.unchanged_prefix_tokens <= result2.token_count
    assert result.token_count - 1 <= result2.unchanged_sent_tokens < result2.token_count


TOOL = {"type": "function", "function": {"name": "search", "parameters": {"type": "object"}}}


def test_bound_tools_are_rendered_where_the_format_can():
    llm = _llm(NodeRegistry())
    sent, result = llm.align(_history(1), tools=[TOOL])
    assert result is not None and "search" in result.prompt.split("<｜User｜>")[0]
    chatml = PhaseAwareAgentLLM(
        llm=llm.llm, tokenizer="tiktoken:o200k_base", chat_format="chatml", profile=None,
        budget_tokens=8000,
    )  # fmt: skip
    with pytest.raises(UnsupportedSettingError, match="tool_schemas='not_rendered'"):
        chatml.align(_history(1), tools=[TOOL])
    quiet = PhaseAwareAgentLLM(
        llm=llm.llm, tokenizer="tiktoken:o200k_base", chat_format="chatml", profile=None,
        budget_tokens=8000, tool_schemas="not_rendered",
    )  # fmt: skip
    assert quiet.align(_history(1), tools=[TOOL])[1] is not None


def test_the_wrapped_llms_reasoning_effort_is_planned_with():
    from phaseaware.chat import ChatSettings
    from phaseaware.chat.deepseek_v4 import EFFORT_PREAMBLES

    inner = OpenAILike(model="m", api_base="http://127.0.0.1:9/v1", api_key="x",
                       is_chat_model=True, is_function_calling_model=True,
                       additional_kwargs={"reasoning_effort": "max"})  # fmt: skip
    llm = PhaseAwareAgentLLM(
        llm=inner, tokenizer="deepseek-v4", chat_format="deepseek-v4", budget_tokens=8000,
        profile="deepseek-v4-flash-base", settings=ChatSettings(thinking=True),
    )  # fmt: skip
    assert llm.target.settings is not None and llm.target.settings.reasoning_effort == "max"
    _, result, kwargs = llm._send(_history(1), {})
    assert kwargs["extra_body"]["chat_template_kwargs"]["reasoning_effort"] == "max"
    assert EFFORT_PREAMBLES["max"] in result.prompt
    _, result, kwargs = llm._send(_history(2), {"reasoning_effort": "high"})  # on the call
    assert kwargs["reasoning_effort"] == "high"
    assert kwargs["extra_body"]["chat_template_kwargs"]["reasoning_effort"] == "high"
    assert (
        EFFORT_PREAMBLES["high"] in result.prompt and EFFORT_PREAMBLES["max"] not in result.prompt
    )
    v41 = PhaseAwareAgentLLM(
        llm=inner, tokenizer="deepseek-v4", chat_format="deepseek-v4.1", budget_tokens=8000,
        profile="deepseek-v4-flash-base", settings=ChatSettings(thinking=True),
    )  # fmt: skip
    with pytest.raises(UnsupportedSettingError, match=r"PhaseAwareAgentLLM\(settings="):
        v41._send(_history(1), {"reasoning_effort": "minimal"})  # vLLM's V4.1: HTTP 400


def test_the_prompt_ids_are_asked_for_where_the_server_returns_them():
    import dataclasses

    pytest.importorskip("deepseek_recipe")  # the SGLang renderer (phaseaware's sglang extra)

    from phaseaware.endpoints import EndpointRecord
    from phaseaware.tokenizers import load_tokenizer

    tok = load_tokenizer("deepseek-v4")
    record = EndpointRecord(
        base_url="http://127.0.0.1:30000/v1", model="m", offset=0, offsets=(0,), mode="count",
        stability="constant", date="2026-12-04T00:00:00+00:00", tokenizer_spec=tok.spec,
        tokenizer_fingerprint=tok.fingerprint(), chat_format="deepseek-v4", probes=9,
        tool_version="0", server="sglang 0.5.23", renderer="sglang",
    )  # fmt: skip
    llm = _llm(NodeRegistry(), endpoint=record)
    assert llm.target.settings is not None and llm.target.settings.renderer == "sglang"
    _, _, kwargs = llm._send(_history(1), {})
    assert kwargs["extra_body"]["return_prompt_token_ids"] is True
    _, _, kwargs = llm._send(_history(2), {}, stream=True)  # SGLang refuses them streaming
    assert "return_prompt_token_ids" not in kwargs["extra_body"]
    vllm = _llm(NodeRegistry(), endpoint=dataclasses.replace(record, server="vllm 0.32.0",
                                                             renderer=None))  # fmt: skip
    assert vllm._send(_history(1), {})[2]["extra_body"]["return_token_ids"] is True
