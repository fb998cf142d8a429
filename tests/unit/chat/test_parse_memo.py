"""Parsing a resent message list reuses earlier parses, and gives what a fresh parse gives."""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from phaseaware.chat import messages as messages_module
from phaseaware.chat.errors import MessageContentError, UnknownRoleError
from phaseaware.chat.messages import parse_message, parse_messages

TEXT = st.sampled_from(["", "a", "{context}", "x y", "中"])
CALL = st.fixed_dictionaries(
    {"id": st.sampled_from(["c1", "c2"]), "type": st.just("function"),
     "function": st.fixed_dictionaries(
         {"name": st.sampled_from(["f", "g"]),
          "arguments": st.sampled_from(["{}", '{"q": 1}', "[]", "{bad", {"q": 2}])})}
)  # fmt: skip
MESSAGE = st.fixed_dictionaries(
    {"role": st.sampled_from(["user", "assistant", "tool", "system", "robot"]), "content": TEXT},
    optional={"tool_calls": st.lists(CALL, max_size=2), "tool_call_id": st.sampled_from(["c1", 3]),
              "name": TEXT, "reasoning": TEXT, "reasoning_content": TEXT, "extra": TEXT},
)  # fmt: skip


def _outcome(fn: Any) -> object:
    try:
        return fn()
    except (MessageContentError, UnknownRoleError) as exc:
        return (type(exc), str(exc))


@settings(max_examples=400, deadline=None)
@given(raw=st.lists(MESSAGE, min_size=1, max_size=4))
def test_memo_parse_equals_fresh_parse(raw: list[dict[str, Any]]) -> None:
    fresh = _outcome(lambda: tuple(parse_message(m, index=i) for i, m in enumerate(raw)))
    assert _outcome(lambda: parse_messages(raw)) == fresh
    assert _outcome(lambda: parse_messages(raw)) == fresh  # the second time from the memo


def test_resent_dict_gives_the_same_message_and_a_changed_one_a_new_one() -> None:
    call = {"id": "c1", "type": "function", "function": {"name": "f", "arguments": '{"q": 1}'}}
    raw = [{"role": "assistant", "content": "hi", "tool_calls": [call]}]
    first = parse_messages(raw)[0]
    assert parse_messages([dict(raw[0])])[0] is first
    call["function"]["arguments"] = '{"q": 2}'  # changed in place: parsed anew
    assert parse_messages(raw)[0].tool_calls[0].arguments == '{"q": 2}'
    with pytest.raises(MessageContentError):
        parse_messages([{**raw[0], "unknown": 1}])
    assert len(messages_module._PARSED) > 0
