"""Kept renders of a conversation's start: found only for equal messages, bounded, and a
render after one writes the new messages only."""

from __future__ import annotations

import sys
from dataclasses import dataclass

import pytest

from phaseaware.caches import list_caches
from phaseaware.chat import message_wise
from phaseaware.chat.errors import UnknownRoleError
from phaseaware.chat.formats import ChatMLFormat, PlainFormat, render_after_kept
from phaseaware.chat.messages import Message, ToolCall
from phaseaware.chat.prefix_renders import PrefixRenders


@dataclass(frozen=True)
class Kept:
    messages: tuple[Message, ...]
    text: str


def _conversation(n: int) -> tuple[Message, ...]:
    return tuple(Message(role="user" if i % 2 else "system", content=f"m{i}") for i in range(n))


def _memo(**kwargs: int) -> PrefixRenders[Kept]:
    return PrefixRenders(
        name="test kept renders", size_of=lambda k: sys.getsizeof(k.text), **kwargs
    )


def test_longest_equal_start_is_found():
    memo = _memo()
    messages = _conversation(6)
    for n in (2, 4, 5):
        memo.put("fmt", Kept(messages[:n], f"text of {n}"))
    assert memo.longest("fmt", messages).text == "text of 5"
    assert memo.longest("fmt", messages[:4]).text == "text of 4"
    assert memo.longest("fmt", messages[:3]).text == "text of 2"
    assert memo.longest("fmt", messages[:1]) is None
    assert memo.longest("other format", messages) is None  # the key holds the settings
    assert memo.longest("fmt", messages[:4], min_messages=5) is None


def test_an_edited_earlier_message_finds_a_shorter_start():
    memo = _memo()
    messages = _conversation(6)
    memo.put("fmt", Kept(messages[:2], "two"))
    memo.put("fmt", Kept(messages[:5], "five"))
    edited = (*messages[:3], messages[3].with_content("m3!"), *messages[4:])
    assert memo.longest("fmt", edited).text == "two"
    # equal messages that are other objects are found (an agent's list parsed again)
    copies = tuple(Message(role=m.role, content="".join(list(m.content))) for m in messages)
    assert memo.longest("fmt", copies).text == "five"


def test_kept_renders_are_bounded_and_listed():
    memo = _memo(max_entries=3)
    messages = _conversation(10)
    for n in range(1, 10):
        memo.put("fmt", Kept(messages[:n], "x" * n))
    assert len(memo) == 3
    assert memo.longest("fmt", messages).text == "x" * 9
    listed = {c.name: c for c in list_caches()}
    assert listed["chat.formats kept renders"].bound.startswith("LRU")
    assert listed["chat.deepseek renders"].bound.startswith("LRU")


class CountingChatML(ChatMLFormat):
    """ChatML that counts the message texts it writes."""

    def __init__(self) -> None:
        super().__init__(bos_text="<s>")
        self.written: list[int] = []

    def message_text(self, index: int, message: Message) -> str:
        self.written.append(index)
        return super().message_text(index, message)


def test_an_agent_step_writes_the_new_messages_only():
    message_wise._KEPT.clear()
    fmt = CountingChatML()
    calls = (ToolCall(name="search", arguments='{"q": "x"}', id="c0"),)
    messages = [
        Message(role="system", content="S"),
        Message(role="user", content="U"),
        Message(role="assistant", content="", tool_calls=calls),
    ]
    whole = fmt.render(messages, add_generation_prompt=False)
    assert fmt.written == [0, 1, 2]
    fmt.written.clear()
    messages.append(Message(role="tool", content="R", tool_call_id="c0"))
    step = fmt.render(messages)
    assert fmt.written == [3]  # the tool result alone
    assert step == whole + "<|im_start|>tool\nR<|im_end|>\n<|im_start|>assistant\n"
    fmt.written.clear()
    edited = [messages[0].with_content("S!"), *messages[1:]]
    fmt.render(edited)
    assert fmt.written == [0, 1, 2, 3]  # an edited first message: nothing kept fits


def test_a_bad_role_after_a_kept_start_is_refused_with_its_index():
    message_wise._KEPT.clear()
    fmt = PlainFormat(bos_text="")
    messages = [Message(role="user", content="a"), Message(role="assistant", content="b")]
    assert fmt.render(messages) == "a\n\nb"
    with pytest.raises(UnknownRoleError, match="message 2 has role 'developer'"):
        fmt.render([*messages, Message(role="developer", content="d")])
    assert render_after_kept(fmt, messages, add_generation_prompt=True) == "a\n\nb"
