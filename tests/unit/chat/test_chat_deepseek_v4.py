"""DeepSeek-V4 chat encoding: known answers for each rule of the official encoder."""

from __future__ import annotations

import pytest

from phaseaware.chat import ToolResultError, parse_messages
from phaseaware.chat.deepseek_v4 import DeepSeekV4Format

B, E = "<｜begin▁of▁sentence｜>", "<｜end▁of▁sentence｜>"
U, A = "<｜User｜>", "<｜Assistant｜>"


def _call(call_id, name="search", arguments='{"q": "x", "n": 2}'):
    return {"id": call_id, "type": "function", "function": {"name": name, "arguments": arguments}}


def render(messages, *, thinking=False, drop_thinking=True, add_generation_prompt=True):
    fmt = DeepSeekV4Format(thinking=thinking, drop_thinking=drop_thinking)
    return fmt.render(parse_messages(messages), add_generation_prompt=add_generation_prompt)


HISTORY = [
    {"role": "system", "content": "S"},
    {"role": "user", "content": "hello"},
    {"role": "assistant", "content": "Hi!", "reasoning_content": "greet"},
    {"role": "user", "content": "1+1=?"},
]


def test_system_user_is_the_single_turn_prompt():
    for thinking, opener in ((False, "</think>"), (True, "<think>")):
        messages = [{"role": "system", "content": "S"}, {"role": "user", "content": "C\n\nQ"}]
        assert render(messages, thinking=thinking) == f"{B}S{U}C\n\nQ{A}{opener}"


def test_multi_turn_non_thinking_never_writes_reasoning():
    assert render(HISTORY) == f"{B}S{U}hello{A}</think>Hi!{E}{U}1+1=?{A}</think>"


def test_thinking_drops_reasoning_before_the_last_user_turn():
    assert render(HISTORY, thinking=True) == f"{B}S{U}hello{A}</think>Hi!{E}{U}1+1=?{A}<think>"
    assert render(HISTORY, thinking=True, drop_thinking=False) == (
        f"{B}S{U}hello{A}<think>greet</think>Hi!{E}{U}1+1=?{A}<think>"
    )
    # after the last user turn the reasoning stays
    answered = [*HISTORY, {"role": "assistant", "content": "2", "reasoning_content": "add"}]
    assert render(answered, thinking=True).endswith(f"{U}1+1=?{A}<think>add</think>2{E}")


def test_tool_calls_and_results_merge_into_one_user_turn_in_call_order():
    messages = [
        {"role": "user", "content": "find"},
        {"role": "assistant", "content": "", "tool_calls": [_call("a"), _call("b", "open")]},
        {"role": "tool", "tool_call_id": "b", "content": "RB"},
        {"role": "tool", "tool_call_id": "a", "content": "RA"},
        {"role": "user", "content": "thanks"},
    ]
    dsml = (
        "\n\n<｜DSML｜tool_calls>\n"
        '<｜DSML｜invoke name="search">\n'
        '<｜DSML｜parameter name="q" string="true">x</｜DSML｜parameter>\n'
        '<｜DSML｜parameter name="n" string="false">2</｜DSML｜parameter>\n'
        "</｜DSML｜invoke>\n"
        '<｜DSML｜invoke name="open">\n'
        '<｜DSML｜parameter name="q" string="true">x</｜DSML｜parameter>\n'
        '<｜DSML｜parameter name="n" string="false">2</｜DSML｜parameter>\n'
        "</｜DSML｜invoke>\n"
        "</｜DSML｜tool_calls>"
    )
    assert render(messages) == (
        f"{B}{U}find{A}</think>{dsml}{E}"
        f"{U}<tool_result>RA</tool_result>\n\n<tool_result>RB</tool_result>\n\nthanks{A}</think>"
    )


def test_user_turn_followed_by_system_gets_no_transition():
    messages = [
        {"role": "user", "content": "a"},
        {"role": "system", "content": "S2"},
        {"role": "user", "content": "b"},
    ]
    assert render(messages) == f"{B}{U}aS2{U}b{A}</think>"


def test_generation_prompt_can_be_left_out():
    assert render(HISTORY, add_generation_prompt=False) == (
        f"{B}S{U}hello{A}</think>Hi!{E}{U}1+1=?"
    )


def test_tool_result_without_a_call_is_a_typed_error():
    with pytest.raises(ToolResultError, match="message 1 is a tool result"):
        render([{"role": "user", "content": "q"}, {"role": "tool", "content": "r"}])
