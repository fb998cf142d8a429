"""PhaseAwareMiddleware.align / wrap_model_call without a server (the e2e test has one).

The handler below stands in for the model call only to capture the request; the
end-to-end test runs the same middleware inside create_agent against a real server.
"""

from __future__ import annotations

import pytest

pytest.importorskip("langchain.agents")

from typing import Any  # noqa: E402

from langchain.agents.middleware import (  # noqa: E402
    ExtendedModelResponse,
    ModelRequest,
    ModelResponse,
)
from langchain_core.documents import Document  # noqa: E402
from langchain_core.messages import AIMessage, HumanMessage, SystemMessage, ToolMessage  # noqa: E402
from langchain_openai import ChatOpenAI  # noqa: E402
from langchain_phaseaware import PhaseAwareMiddleware  # noqa: E402
from langchain_phaseaware.convert import message_dicts  # noqa: E402
from langchain_phaseaware.middleware import REPORT_KEY  # noqa: E402

from phaseaware.chat.formats import get_chat_format  # noqa: E402
from phaseaware.chat.messages import parse_messages  # noqa: E402
from phaseaware.errors import InputError, PromptTokenDriftError  # noqa: E402

QUESTION = "Below which voltage is a Helios-3 module disabled?"
CALL = {"name": "search", "args": {"query": "helios"}, "id": "call-1"}


def _middleware(o200k: Any, options: Any, profile_name: str, **kw: Any) -> PhaseAwareMiddleware:
    return PhaseAwareMiddleware(
        tokenizer=o200k, chat_format="chatml", profile=profile_name, budget_tokens=2000,
        options=options, **kw,
    )  # fmt: skip


def _request(messages: list[Any]) -> ModelRequest:
    model = ChatOpenAI(
        base_url="http://127.0.0.1:9/v1", api_key="unused", model="m"
    )  # never called
    return ModelRequest(model=model, messages=messages, system_message=SystemMessage("Be brief."))


def _history(docs: list[Document], *, artifact: bool = True) -> list[Any]:
    tool = ToolMessage(
        content="\n\n".join(d.page_content for d in docs),
        artifact=docs if artifact else None,
        tool_call_id="call-1",
        name="search",
        id="tool-1",
    )
    return [HumanMessage(QUESTION, id="h-1"), AIMessage("", tool_calls=[CALL], id="a-1"), tool]


def _render(o200k: Any, request: ModelRequest, *, prompt: bool = True) -> str:
    messages = [request.system_message, *request.messages]
    fmt = get_chat_format("chatml", o200k)
    return fmt.render(parse_messages(message_dicts(messages)), add_generation_prompt=prompt)


@pytest.mark.parametrize("artifact", [True, False])
def test_align_places_the_newest_tool_result_and_keeps_the_sent_prefix(
    o200k, options, profile_name, make_documents, artifact
):
    docs = make_documents(4)
    history = _history(docs, artifact=artifact)
    request = _request(history)
    original = history[-1].model_copy(deep=True)
    sent, aligned, result = _middleware(o200k, options, profile_name).align(request)
    assert history[-1] == original and request.messages == history  # nothing mutated
    assert aligned is not None and result is not None and aligned.id == "tool-1"
    assert sent.messages[-1] is aligned and sent.messages[:-1] == history[:-1]
    text = _render(o200k, sent)
    assert text == result.prompt
    before = _render(o200k, _request(history[:-1]), prompt=False)  # ends with the assistant
    assert text.startswith(before)  # the already-sent conversation keeps its bytes
    report = aligned.response_metadata[REPORT_KEY]
    measured = o200k.tokenize(text)
    assert report["token_count"] == len(measured)
    # leading ids shared with the sent conversation, and with the prompt without context
    ids, held = o200k.encode(text), o200k.encode(before)
    pairs = enumerate(zip(ids, held, strict=False))
    shared = next((i for i, (a, b) in pairs if a != b), min(len(ids), len(held)))
    assert report["unchanged_sent_tokens"] == result.unchanged_sent_tokens == shared
    assert 0 < report["unchanged_prefix_tokens"] == result.unchanged_prefix_tokens <= len(ids)
    for p in report["placements"]:
        for pos, char in zip(p["key_token_positions"], p["key_char_offsets"], strict=True):
            assert measured.token_at_char(char) == pos
        assert docs[p["document_index"]].page_content in aligned.content


def test_nothing_to_align(o200k, options, profile_name, make_documents):
    middleware = _middleware(o200k, options, profile_name)
    history = _history(make_documents(2))
    _, aligned, _ = middleware.align(_request(history))
    for messages in (
        [*history[:-1], aligned],  # already aligned: never again
        [*history, AIMessage("3.32 volts"), HumanMessage("thanks")],  # last is not a tool result
    ):
        sent, again, result = middleware.align(_request(messages))
        assert again is None and result is None and sent.messages == messages
    other = _middleware(o200k, options, profile_name, tool_names=["web"])
    assert other.align(_request(history))[1] is None


def test_wrap_model_call_persists_the_aligned_message_and_checks_usage(
    o200k, options, profile_name, make_documents
):
    seen: list[ModelRequest] = []

    def handler(usage_extra: int) -> Any:
        def call(request: ModelRequest) -> ModelResponse:
            seen.append(request)
            n = len(o200k.encode(_render(o200k, request))) + usage_extra
            usage = {"input_tokens": n, "output_tokens": 1, "total_tokens": n + 1}
            return ModelResponse(result=[AIMessage("3.32", usage_metadata=usage)])

        return call

    middleware = _middleware(o200k, options, profile_name, check_usage="raise")
    request = _request(_history(make_documents(3)))
    out = middleware.wrap_model_call(request, handler(0))
    assert isinstance(out, ExtendedModelResponse)
    (stored,) = out.command.update["messages"]
    assert stored.id == "tool-1" and stored is seen[-1].messages[-1]
    with pytest.raises(PromptTokenDriftError, match="drift \\+2"):
        middleware.wrap_model_call(request, handler(2))


def test_user_role_view_for_models_without_a_tool_role(
    o200k, options, profile_name, make_documents
):
    middleware = _middleware(o200k, options, profile_name, tool_role="user")
    sent, aligned, _ = middleware.align(_request(_history(make_documents(2))))
    assert [m.type for m in sent.messages] == ["human", "ai", "human"]
    assert sent.messages[1].tool_calls == [] and sent.messages[-1].content == aligned.content
    assert isinstance(aligned, ToolMessage)  # the state keeps the real tool message


def test_constructor_errors(o200k, options, profile_name):
    with pytest.raises(InputError, match="tool_role"):
        _middleware(o200k, options, profile_name, tool_role="system")
    with pytest.raises(InputError, match="check_usage"):
        _middleware(o200k, options, profile_name, check_usage="loud")


def test_message_template_puts_the_question_after_the_context(
    o200k, options, profile_name, make_documents
):
    middleware = _middleware(
        o200k, options, profile_name, tool_role="user", message_template="{context}\n\n{question}"
    )
    sent, aligned, result = middleware.align(_request(_history(make_documents(2))))
    assert aligned.content.endswith("\n\n" + QUESTION)
    assert aligned.content[: -len(QUESTION) - 2] == result.context
    assert _render(o200k, sent) == result.prompt
    assert aligned.response_metadata[REPORT_KEY]["token_count"] == len(o200k.encode(result.prompt))
    with pytest.raises(InputError, match="message_template"):
        _middleware(o200k, options, profile_name, message_template="no slot")


def _tool_request(messages: list[Any]) -> ModelRequest:
    from langchain_core.tools import tool

    @tool
    def search(query: str) -> str:
        """Search the notes."""
        return query

    model = ChatOpenAI(base_url="http://127.0.0.1:9/v1", api_key="unused", model="m")
    return ModelRequest(
        model=model, messages=messages, system_message=SystemMessage("Be brief."), tools=[search]
    )


def test_bound_tools_are_refused_by_a_format_that_cannot_render_them(
    o200k, options, profile_name, make_documents
):
    from phaseaware.chat import UnsupportedSettingError

    request = _tool_request(_history(make_documents(2)))
    with pytest.raises(UnsupportedSettingError, match="tool_schemas='not_rendered'"):
        _middleware(o200k, options, profile_name).align(request)
    quiet = _middleware(o200k, options, profile_name, tool_schemas="not_rendered")
    assert quiet.align(request)[1] is not None


def test_bound_tools_are_planned_where_deepseek_v4_renders_them(deepseek_v4_tok, make_documents):
    from langchain_phaseaware.convert import document_records, tool_schemas

    import phaseaware
    from phaseaware.chat import ChatSettings, get_chat_format
    from phaseaware.integrate import record_chunks

    request = _tool_request(_history(make_documents(3)))
    middleware = PhaseAwareMiddleware(
        tokenizer=deepseek_v4_tok, chat_format="deepseek-v4", profile="deepseek-v4-flash-base",
        budget_tokens=4000,
    )  # fmt: skip
    _, aligned, result = middleware.align(request)
    assert result is not None and "search" in result.prompt.split("<｜User｜>")[0]
    schemas = tool_schemas(request.tools)
    fmt = get_chat_format("deepseek-v4", deepseek_v4_tok, settings=ChatSettings(tools=schemas))
    sent = message_dicts([request.system_message, *request.messages[:-1]])
    expected = phaseaware.assemble_append(
        sent=sent, new={"role": "tool", "content": "{context}", "tool_call_id": "call-1"},
        chunks=record_chunks(document_records(request.messages[-1].artifact)),
        tokenizer=deepseek_v4_tok, chat_format=fmt, question=QUESTION,
        profile="deepseek-v4-flash-base", budget_tokens=4000,
    )  # fmt: skip
    assert result == expected
