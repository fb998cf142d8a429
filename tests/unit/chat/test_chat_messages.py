"""Chat messages: parsing, the one {context} slot, {question} placeholders, typed errors."""

from __future__ import annotations

import pytest

from phaseaware.chat import (
    DuplicateSlotError,
    Message,
    MessageContentError,
    MissingSlotError,
    Placeholder,
    ToolCall,
    ToolResultError,
    UnknownRoleError,
    parse_conversation,
    parse_message,
    simple_conversation,
)
from phaseaware.chat.messages import check_tool_results
from phaseaware.errors import InputError

CALL = {"id": "c1", "type": "function", "function": {"name": "search", "arguments": '{"q": "x"}'}}


def test_parse_roundtrip_keeps_only_given_fields():
    raw = {"role": "assistant", "content": None, "tool_calls": [CALL], "reasoning": "hmm"}
    message = parse_message(raw)
    assert message == Message(
        role="assistant",
        content="",
        tool_calls=(ToolCall(name="search", arguments='{"q": "x"}', id="c1"),),
        reasoning_content="hmm",
    )
    assert message.to_openai() == {
        "role": "assistant",
        "content": "",
        "tool_calls": [CALL],
        "reasoning_content": "hmm",
    }
    assert parse_message({"role": "user", "content": "hi"}).to_openai() == {
        "role": "user",
        "content": "hi",
    }


def test_arguments_given_as_object_become_json_text():
    call = {"type": "function", "function": {"name": "f", "arguments": {"a": [1, "é"]}}}
    message = parse_message({"role": "assistant", "content": "", "tool_calls": [call]})
    assert message.tool_calls[0].arguments == '{"a": [1, "é"]}'


@pytest.mark.parametrize(
    "raw, error, needle",
    [
        ({"role": "bot", "content": "x"}, UnknownRoleError, "system, user, assistant, tool"),
        ({"role": "user", "content": 3}, MessageContentError, "must be a string"),
        ({"role": "user", "content": [{"type": "text", "text": "a"}]}, MessageContentError, "join"),
        ({"role": "user", "content": "x", "extra": 1}, MessageContentError, "unknown keys"),
        ({"role": "user", "content": "x", "tool_calls": [CALL]}, MessageContentError, "assistant"),
        (
            {
                "role": "assistant",
                "content": "",
                "tool_calls": [{"function": {"name": "f", "arguments": "{bad"}}],
            },
            MessageContentError,
            "not valid JSON",
        ),  # fmt: skip
        (
            {
                "role": "assistant",
                "content": "",
                "tool_calls": [{"function": {"name": "f", "arguments": "[1]"}}],
            },
            MessageContentError,
            "JSON object",
        ),  # fmt: skip
        (
            {"role": "assistant", "content": "a", "reasoning": "x", "reasoning_content": "y"},
            MessageContentError,
            "differ",
        ),  # fmt: skip
        ("user: hi", MessageContentError, "must be an object"),
    ],
)
def test_bad_messages_raise_typed_errors_naming_the_fix(raw, error, needle):
    with pytest.raises(error, match=needle) as info:
        parse_conversation([{"role": "user", "content": "{context}"}, raw])
    assert isinstance(info.value, InputError)
    assert "message 1" in str(info.value)


@pytest.mark.parametrize("name", ["none", "chatml"])
def test_deepseek_roles_parse_but_other_formats_refuse_them(name):
    from phaseaware.chat import get_chat_format, parse_messages
    from phaseaware.tokenizers import load_tokenizer

    fmt = get_chat_format(name, load_tokenizer("tiktoken:cl100k_base"))
    for role, fix in (("developer", "use role system"), ("latest_reminder", "use role user")):
        messages = parse_messages(
            [{"role": "user", "content": "a"}, {"role": role, "content": "x"}]
        )
        with pytest.raises(UnknownRoleError, match=f"message 1 has role '{role}'.*{fix}"):
            fmt.render(messages)


def test_no_slot_and_two_slots():
    with pytest.raises(MissingSlotError, match=r"literal \{context\}"):
        parse_conversation([{"role": "user", "content": "hi {question}"}])
    with pytest.raises(DuplicateSlotError, match=r"message 0 \(1x\), message 2 \(1x\)"):
        parse_conversation(
            [
                {"role": "system", "content": "{context}"},
                {"role": "user", "content": "q"},
                {"role": "user", "content": "again {context}"},
            ]
        )
    with pytest.raises(DuplicateSlotError, match="2 context slots"):
        parse_conversation([{"role": "user", "content": "{context}{context}"}])
    with pytest.raises(MessageContentError, match="non-empty list"):
        parse_conversation([])


def test_fill_replaces_every_question_and_never_rescans():
    template = parse_conversation(
        [
            {"role": "system", "content": "Answer {question} from:\n{context}\nEnd {question}."},
            {"role": "user", "content": "{question}"},
        ]
    )
    assert template.slot_index == 0
    filled = template.fill(context="C {question}", question="Q {context}?")
    assert [m.content for m in filled] == [
        "Answer Q {context}? from:\nC {question}\nEnd Q {context}?.",
        "Q {context}?",
    ]
    assert template.parts[1] == (Placeholder.QUESTION,)


def test_simple_conversation_takes_system_verbatim():
    template = simple_conversation(system="Use {context} and {question} literally")
    filled = template.fill(context="C", question="Q")
    assert [(m.role, m.content) for m in filled] == [
        ("system", "Use {context} and {question} literally"),
        ("user", "C\n\nQ"),
    ]
    assert [m.role for m in simple_conversation(system="").messages] == ["user"]
    assert [m.role for m in simple_conversation(system=None).messages] == ["user"]


def _tool(call_id="c1"):
    return Message(role="tool", content="r", tool_call_id=call_id)


def _assistant(*ids):
    return Message(
        role="assistant", content="", tool_calls=tuple(ToolCall(name="f", id=i) for i in ids)
    )


def test_tool_results_must_answer_calls():
    user = Message(role="user", content="q")
    check_tool_results([user, _assistant("a", "b"), _tool("b"), _tool("a")])
    with pytest.raises(ToolResultError, match="message 0 is a tool result"):
        check_tool_results([_tool()])
    with pytest.raises(ToolResultError, match="message 3"):
        check_tool_results([user, _assistant("a"), _tool(), _tool()])
    with pytest.raises(ToolResultError, match="message 2"):
        check_tool_results([_assistant("a"), user, _tool()])
