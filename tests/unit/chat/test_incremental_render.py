"""A render that reuses a remembered render of the conversation's beginning equals a
whole render, byte for byte, over random growing tool loops (and changed prefixes), in
every built-in format that keeps renders (deepseek-v4, deepseek-v4.1, chatml, none)."""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from phaseaware.chat import deepseek_encoding, message_wise
from phaseaware.chat.formats import get_chat_format
from phaseaware.chat.messages import Message, ToolCall
from phaseaware.chat.settings import ChatSettings
from phaseaware.errors import PhaseawareError
from phaseaware.tokenizers import load_tokenizer

TOKENIZER = load_tokenizer("deepseek-v4")
TOOLS = ({"type": "function", "function": {"name": "search", "parameters": {"type": "object"}}},)
TEXT = st.lists(st.sampled_from(["a", "中", " ", "\n", "|", "<", "x.", ""]), max_size=6).map(
    "".join
)


@st.composite
def growing(draw: st.DrawFn) -> list[list[Message]]:
    """Batches of messages appended one after another: a tool loop with some noise."""
    batches: list[list[Message]] = []
    if draw(st.booleans()):
        batches.append([Message(role="system", content=draw(TEXT))])
    batches.append([Message(role="user", content=draw(TEXT))])
    for n in range(draw(st.integers(1, 8))):
        calls = tuple(
            ToolCall(name="search", arguments=f'{{"q": "{k}"}}', id=f"c{n}_{k}")
            for k in range(draw(st.integers(0, 3)))
        )
        batch = [
            Message(
                role="assistant", content=draw(TEXT), tool_calls=calls,
                reasoning_content=draw(st.none() | TEXT),
            )
        ]  # fmt: skip
        answered = draw(st.permutations(list(calls)))
        batch += [Message(role="tool", content=draw(TEXT), tool_call_id=c.id) for c in answered]
        extra = draw(st.sampled_from([None, "user", "system", "developer", "latest_reminder"]))
        if extra is not None:
            batch.append(Message(role=extra, content=draw(TEXT) or "d"))  # type: ignore[arg-type]
        if draw(st.integers(0, 9)) == 0:  # refused: a stray tool result, an empty developer
            batch.append(draw(st.sampled_from([
                Message(role="tool", content="r", tool_call_id="none"),
                Message(role="developer", content=""),
            ])))  # fmt: skip
        batches.append(batch)
    return batches


def _forget() -> None:
    """No remembered render left: the next render is a whole one."""
    deepseek_encoding._RENDERS.clear()
    message_wise._KEPT.clear()


def _whole(fmt: Any, messages: list[Message], gen: bool) -> str:
    _forget()
    try:
        return str(fmt.render(messages, add_generation_prompt=gen))
    except PhaseawareError as exc:
        return f"{type(exc).__name__}: {exc}"


def _kept(fmt: Any, messages: list[Message], gen: bool) -> str:
    try:
        return str(fmt.render(messages, add_generation_prompt=gen))
    except PhaseawareError as exc:
        return f"{type(exc).__name__}: {exc}"


SETTINGS = [
    ChatSettings(),
    ChatSettings(thinking=True, drop_thinking=False),
    ChatSettings(thinking=True),
    ChatSettings(tools=TOOLS),
    ChatSettings(thinking=True, tools=TOOLS),
]


@pytest.mark.parametrize("name", ["deepseek-v4", "deepseek-v4.1", "chatml", "none"])
@pytest.mark.parametrize("chat_settings", SETTINGS, ids=range(len(SETTINGS)))
@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(batches=growing(), gens=st.lists(st.booleans(), min_size=20, max_size=20), data=st.data())
def test_incremental_render_equals_whole(
    name: str, chat_settings: ChatSettings, batches: list[list[Message]], gens: list[bool],
    data: st.DataObject,
) -> None:  # fmt: skip
    if name in ("chatml", "none") and chat_settings != ChatSettings():
        return
    fmt = get_chat_format(name, TOKENIZER, settings=chat_settings)
    _forget()
    messages: list[Message] = []
    for k, batch in enumerate(batches):
        messages += batch
        gen = gens[k % len(gens)]
        assert _kept(fmt, messages, gen) == _whole(fmt, messages, gen)
        # the slot message filled differently, as a layout renders it
        filled = [*messages[:-1], messages[-1].with_content(messages[-1].content + "ctx")]
        assert _kept(fmt, filled, not gen) == _whole(fmt, filled, not gen)
        # a changed earlier message: the remembered render must not be reused for it
        if len(messages) > 2:
            i = data.draw(st.integers(0, len(messages) - 2))
            changed = [*messages]
            changed[i] = changed[i].with_content(changed[i].content + "!")
            assert _kept(fmt, changed, gen) == _whole(fmt, changed, gen)
            _kept(fmt, messages, gen)  # remember the real conversation again
