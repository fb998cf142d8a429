"""Reasoning effort as the server takes it: every value vLLM's DeepSeek wrappers accept
renders what they render, and only what they refuse is refused.

The oracle is ``vllm_request`` in ``tests/support/deepseek_reference.py``, a
transliteration of vLLM 0.32's ``_DeepseekV4Tokenizer`` / ``_DeepseekV41Tokenizer``
``apply_chat_template`` (how ``chat_template_kwargs`` become the encoder's thinking mode
and effort), fed with the kwargs phaseaware's requests send. The same check runs copy-free
through vLLM's own wrappers in ``scripts/compare_dsv4_encoder.py --efforts-only`` (vLLM tier).
"""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from phaseaware.chat import (
    ChatSettings,
    UnsupportedSettingError,
    get_chat_format,
    parse_messages,
)
from phaseaware.chat.deepseek_v41 import EFFORT_TABLES, effort_budget
from phaseaware.tokenizers import load_tokenizer
from tests.support.deepseek_reference import reference_render, vllm_request
from tests.unit.chat.test_chat_deepseek_settings import ROLES, TOOLS, conversations

B, U, A, S = "<｜begin▁of▁sentence｜>", "<｜User｜>", "<｜Assistant｜>", "<｜System｜>"
#: every value vLLM's request field takes, plus names only chat_template_kwargs carry
NAMES = ["none", "minimal", "low", "medium", "high", "xhigh", "max", "ultra", "", "LOW"]
EFFORTS = st.one_of(
    st.none(),
    st.sampled_from(NAMES),
    st.integers(-5, 130),
    st.text(alphabet="abhilmnowx ", max_size=6),
)


def _fmt(name: str, chosen: ChatSettings) -> Any:
    return get_chat_format(name, load_tokenizer("deepseek-v4"), settings=chosen)


@pytest.mark.parametrize("name", ["deepseek-v4", "deepseek-v4.1"])
@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(data=st.data())
def test_every_effort_renders_what_vllm_renders_or_is_refused_as_vllm_refuses(name, data):
    v41 = name == "deepseek-v4.1"
    messages = data.draw(conversations(ROLES[name]))
    thinking = data.draw(st.booleans())
    effort = data.draw(EFFORTS)
    tools = data.draw(st.sampled_from([(), tuple(TOOLS)]))
    table = data.draw(st.sampled_from([None, *EFFORT_TABLES])) if v41 else None
    chosen = ChatSettings(
        thinking=thinking, reasoning_effort=effort, tools=tools, effort_budgets=table
    )
    try:
        server_thinking, server_effort = vllm_request(chosen.chat_template_kwargs(name), v41=v41)
    except ValueError:
        with pytest.raises(UnsupportedSettingError, match="integer 1-100"):
            _fmt(name, chosen)
        return
    ours = _fmt(name, chosen).render(parse_messages(messages))
    expected = reference_render(
        messages,
        v41=v41,
        thinking=server_thinking,
        effort=server_effort,
        tools=list(tools) or None,
        table=table or "low50-high75",
    )
    assert ours == expected


@pytest.mark.parametrize(
    "name, effort, start",
    [
        # vLLM's V4 wrapper: minimal/low/medium -> low, max -> max, any other name -> high
        ("deepseek-v4", "minimal", f"{B}{U}q{A}<think>"),
        ("deepseek-v4", "medium", f"{B}{U}q{A}<think>"),
        ("deepseek-v4", "xhigh", f"{B}Reasoning Effort: Absolute maximum"),
        ("deepseek-v4", "ultra", f"{B}Reasoning Effort: Absolute maximum"),
        ("deepseek-v4", 30, f"{B}Reasoning Effort: Absolute maximum"),  # not a string: high
        ("deepseek-v4", "none", f"{B}{U}q{A}</think>"),  # chat mode
        ("deepseek-v4.1", "none", f"{B}{U}q{A}</think>"),
        ("deepseek-v4.1", 100, f"{B}{S}Reasoning Effort: 100 (range"),
    ],
)
def test_server_effort_names(name: str, effort: Any, start: str) -> None:
    chosen = ChatSettings(thinking=True, reasoning_effort=effort)
    assert (
        _fmt(name, chosen)
        .render(parse_messages([{"role": "user", "content": "q"}]))
        .startswith(start)
    )


def test_none_turns_thinking_off_and_an_effort_without_thinking_is_chat_mode() -> None:
    assert ChatSettings(thinking=True, reasoning_effort="none").thinking is False
    messages = parse_messages([{"role": "user", "content": "q"}])
    for name in ("deepseek-v4", "deepseek-v4.1"):
        text = _fmt(name, ChatSettings(reasoning_effort="max")).render(messages)
        assert text == f"{B}{U}q{A}</think>"
        kwargs = ChatSettings(reasoning_effort="max").chat_template_kwargs(name)
        assert kwargs["reasoning_effort"] == "max" and kwargs["enable_thinking"] is False


def test_effort_tables_are_named_and_selectable() -> None:
    messages = parse_messages([{"role": "user", "content": "q"}])
    for table, budgets in EFFORT_TABLES.items():
        for effort, budget in budgets.items():
            chosen = ChatSettings(thinking=True, reasoning_effort=effort, effort_budgets=table)
            assert (
                _fmt("deepseek-v4.1", chosen)
                .render(messages)
                .startswith(f"{B}{S}Reasoning Effort: {budget} (range")
            )
    assert effort_budget("low", table="low25-high50") == 25
    assert effort_budget("low") == 50 and effort_budget(None) == 75 and effort_budget(9) == 9
    with pytest.raises(UnsupportedSettingError, match="known: low50-high75, low25-high50"):
        _fmt("deepseek-v4.1", ChatSettings(thinking=True, effort_budgets="low10"))
    # the table is the server's: never sent, kept in the settings' JSON only when chosen
    chosen = ChatSettings(thinking=True, effort_budgets="low25-high50")
    assert "effort_budgets" not in chosen.chat_template_kwargs("deepseek-v4.1")
    assert ChatSettings.from_dict(chosen.to_dict()) == chosen
    assert "effort_budgets" not in ChatSettings().to_dict()


@pytest.mark.parametrize("effort", ["minimal", "medium", "ultra", "", 0, 101])
def test_v41_refuses_what_vllm_refuses_naming_the_values_it_takes(effort: Any) -> None:
    with pytest.raises(UnsupportedSettingError) as caught:
        _fmt("deepseek-v4.1", ChatSettings(thinking=False, reasoning_effort=effort))
    message = str(caught.value)
    assert "low, high, xhigh, max, none or an integer 1-100" in message and "400" in message
