"""DeepSeek-V4 and V4.1 with every chat setting: random conversations against the
independent transliteration in ``tests/support/deepseek_reference.py``, known answers
for the edge cases, and the typed errors of ``ChatSettings``."""

from __future__ import annotations

import json
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from phaseaware.chat import (
    VLLM_DEFAULT_SETTINGS,
    ChatSettings,
    ChatSettingsError,
    UnknownRoleError,
    UnsupportedSettingError,
    get_chat_format,
    parse_messages,
)
from phaseaware.chat.errors import MessageContentError
from phaseaware.tokenizers import load_tokenizer
from tests.support.deepseek_reference import reference_render

B, E = "<｜begin▁of▁sentence｜>", "<｜end▁of▁sentence｜>"
U, A, S = "<｜User｜>", "<｜Assistant｜>", "<｜System｜>"
TOOLS = [
    {
        "type": "function",
        "function": {
            "name": "search",
            "description": "Search the web for é.",
            "parameters": {"type": "object", "properties": {"q": {"type": "string"}}},
        },
    },
    {"type": "function", "function": {"name": "open_page", "parameters": {}}},
]
RESPONSE_FORMAT = {"type": "json_schema", "json_schema": {"name": "answer", "schema": {}}}


@pytest.fixture(scope="module")
def v4_tok():
    return load_tokenizer("deepseek-v4")


def fmt(name: str, **given: Any):
    return get_chat_format(name, load_tokenizer("deepseek-v4"), settings=ChatSettings(**given))


def render(name: str, messages: list[dict[str, Any]], **given: Any) -> str:
    return fmt(name, **given).render(parse_messages(messages))


# ------------------------------------------------------------------ random conversations

_TEXT = st.text(alphabet=st.sampled_from(list("ab é\n{}\"'数")), max_size=8)
_VALUES = st.one_of(_TEXT, st.integers(-9, 9), st.booleans(), st.lists(_TEXT, max_size=2))


@st.composite
def conversations(draw: st.DrawFn, roles: tuple[str, ...]) -> list[dict[str, Any]]:
    messages: list[dict[str, Any]] = []
    pending: list[str] = []
    for i in range(draw(st.integers(1, 9))):
        role = draw(st.sampled_from(roles + (("tool",) * 3 if pending else ())))
        if role == "tool" and not pending:
            role = "user"
        content = draw(_TEXT)
        if role == "developer" and not content:
            content = "d"
        message: dict[str, Any] = {"role": role, "content": content}
        if role == "assistant":
            pending = []
            if draw(st.booleans()):
                calls = []
                for j in range(draw(st.integers(1, 3))):
                    args = draw(st.dictionaries(st.sampled_from("abq"), _VALUES, max_size=2))
                    calls.append(
                        {
                            "id": f"c{i}_{j}",
                            "type": "function",
                            "function": {
                                "name": draw(st.sampled_from(["search", "open_page"])),
                                "arguments": json.dumps(args, ensure_ascii=False),
                            },
                        }
                    )
                    pending.append(f"c{i}_{j}")
                message["tool_calls"] = calls
                pending = list(draw(st.permutations(pending)))
            if draw(st.booleans()):
                message["reasoning_content"] = draw(_TEXT)
        elif role == "tool":
            message["tool_call_id"] = pending.pop(0)
        else:
            pending = []
        messages.append(message)
    return messages


@st.composite
def chat_settings(draw: st.DrawFn, name: str) -> dict[str, Any]:
    thinking = draw(st.booleans())
    efforts: list[Any] = [None, "low", "high", "max"]
    if name == "deepseek-v4.1":
        efforts += ["xhigh", draw(st.integers(1, 100))]
    tools = draw(st.sampled_from([(), TOOLS, TOOLS[1:]]))
    return {
        "thinking": thinking,
        "reasoning_effort": draw(st.sampled_from(efforts)) if thinking else None,
        "tools": tools,
        "response_format": draw(st.sampled_from([None, RESPONSE_FORMAT])),
        "drop_thinking": draw(st.sampled_from([None, False] + ([] if tools else [True]))),
    }


ROLES = {
    "deepseek-v4": ("system", "user", "assistant", "tool", "developer", "latest_reminder"),
    "deepseek-v4.1": ("system", "user", "assistant", "tool", "developer"),
}


@pytest.mark.parametrize("name", ["deepseek-v4", "deepseek-v4.1"])
@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(data=st.data())
def test_random_conversations_match_the_transliterated_encoder(name, data):
    messages = data.draw(conversations(ROLES[name]))
    given_settings = data.draw(chat_settings(name))
    generation = data.draw(st.booleans())
    ours = fmt(name, **given_settings).render(
        parse_messages(messages), add_generation_prompt=generation
    )
    expected = reference_render(
        messages,
        v41=name == "deepseek-v4.1",
        thinking=given_settings["thinking"],
        effort=given_settings["reasoning_effort"],
        tools=list(given_settings["tools"]) or None,
        response_format=given_settings["response_format"],
        drop_thinking=given_settings["drop_thinking"] is not False,
        add_generation_prompt=generation,
    )
    assert ours == expected


# ------------------------------------------------------------------ known answers


def test_system_after_an_assistant_turn_opens_that_turn():
    # issue 21: the encoder writes the transition after the system text (vLLM agrees)
    messages = [
        {"role": "system", "content": "S"},
        {"role": "assistant", "content": "."},
        {"role": "user", "content": "Hello"},
    ]
    assert render("deepseek-v4", messages) == f"{B}S{A}</think>.{E}{U}Hello{A}</think>"
    # V4.1: a first-turn system message never opens a turn
    assert render("deepseek-v4.1", messages) == f"{B}{S}S.{E}{U}Hello{A}</think>"


def test_trailing_system_message_opens_generation():
    messages = [
        {"role": "user", "content": "a"},
        {"role": "assistant", "content": "b"},
        {"role": "system", "content": "S"},
    ]
    assert render("deepseek-v4", messages) == f"{B}{U}a{A}</think>b{E}S{A}</think>"
    assert render("deepseek-v4.1", messages) == f"{B}{U}a{A}</think>b{E}{S}S{A}</think>"


def test_tools_attach_to_the_first_system_message_or_a_new_one():
    with_system = [
        {"role": "user", "content": "q"},
        {"role": "system", "content": "S1"},
        {"role": "system", "content": "S2"},
    ]
    text = render("deepseek-v4", with_system, tools=TOOLS)
    assert text.startswith(f"{B}{U}qS1\n\n## Tools\n\n")
    assert '{"name": "search", "description": "Search the web for é.", ' in text
    assert text.endswith("invoke tool calls.\nS2" + A + "</think>")
    without = render("deepseek-v4", [{"role": "user", "content": "q"}], tools=TOOLS)
    assert without.startswith(f"{B}\n\n## Tools\n\n") and without.endswith(f"{U}q{A}</think>")


def test_tools_keep_earlier_reasoning():
    history = [
        {"role": "user", "content": "a"},
        {"role": "assistant", "content": "b", "reasoning_content": "r"},
        {"role": "user", "content": "c"},
    ]
    assert f"{A}</think>b{E}" in render("deepseek-v4", history, thinking=True)
    assert f"{A}<think>r</think>b{E}" in render("deepseek-v4", history, thinking=True, tools=TOOLS)
    assert not fmt("deepseek-v4", thinking=True, tools=TOOLS).drop_thinking


@pytest.mark.parametrize(
    "name, effort, start",
    [
        ("deepseek-v4", None, f"{B}{U}"),
        ("deepseek-v4", "low", f"{B}{U}"),
        ("deepseek-v4", "high", f"{B}Reasoning Effort: Absolute maximum"),
        ("deepseek-v4", "max", f"{B}Reasoning Effort: Beyond maximum — exhaustive"),
        ("deepseek-v4.1", None, f"{B}{S}Reasoning Effort: 75 (range 1-100"),
        ("deepseek-v4.1", "low", f"{B}{S}Reasoning Effort: 50 (range"),
        ("deepseek-v4.1", "xhigh", f"{B}{S}Reasoning Effort: 75 (range"),
        ("deepseek-v4.1", "max", f"{B}{S}Reasoning Effort: 100 (range"),
        ("deepseek-v4.1", 7, f"{B}{S}Reasoning Effort: 7 (range"),
    ],
)
def test_reasoning_effort_preambles(name, effort, start):
    text = render(name, [{"role": "user", "content": "q"}], thinking=True, reasoning_effort=effort)
    assert text.startswith(start) and text.endswith(f"{U}q{A}<think>")


def test_developer_and_latest_reminder_roles():
    messages = [
        {"role": "developer", "content": "D"},
        {"role": "user", "content": "q"},
        {"role": "latest_reminder", "content": "R"},
    ]
    assert render("deepseek-v4", messages) == f"{B}{U}D{U}q{A}</think><｜latest_reminder｜>R"
    with pytest.raises(UnknownRoleError, match="latest_reminder.*deepseek-v4.1"):
        render("deepseek-v4.1", messages)
    with pytest.raises(MessageContentError, match="developer message needs content"):
        render("deepseek-v4", [{"role": "developer", "content": ""}])


def test_response_format_follows_the_system_text():
    text = render(
        "deepseek-v4", [{"role": "system", "content": "S"}], response_format=RESPONSE_FORMAT
    )
    assert text == (
        f"{B}S\n\n## Response Format:\n\nYou MUST strictly adhere to the following schema to "
        f"reply:\n{json.dumps(RESPONSE_FORMAT)}{A}</think>"
    )


# ------------------------------------------------------------------ settings and errors


def test_default_settings_keep_todays_output_and_server_defaults_are_explicit():
    assert ChatSettings() == ChatSettings(thinking=False) and not ChatSettings().given()
    assert ChatSettings(thinking=True, reasoning_effort="high") == VLLM_DEFAULT_SETTINGS
    old = get_chat_format("deepseek-v4", load_tokenizer("deepseek-v4"), thinking=True)
    new = fmt("deepseek-v4", thinking=True)
    messages = parse_messages([{"role": "user", "content": "q"}])
    assert old.render(messages) == new.render(messages) == f"{B}{U}q{A}<think>"


@pytest.mark.parametrize(
    "given, error, needle",
    [
        ({"thinking": "false"}, ChatSettingsError, "thinking must be true or false"),
        (
            {"thinking": True, "reasoning_effort": True},
            ChatSettingsError,
            "a name .* or an integer",
        ),
        ({"thinking": True, "reasoning_effort": 0.5}, ChatSettingsError, "a name .* or an integer"),
        ({"effort_budgets": 50}, ChatSettingsError, "effort_budgets must name an effort table"),
        ({"tools": [{"type": "function"}]}, ChatSettingsError, r"tools\[0\]"),
        ({"tools": "search"}, ChatSettingsError, "list of OpenAI tool schemas"),
        ({"tools": TOOLS, "drop_thinking": True}, ChatSettingsError, "leave drop_thinking unset"),
        ({"response_format": "json"}, ChatSettingsError, "JSON object"),
        ({"response_format": {"x": float("nan")}}, ChatSettingsError, "must be JSON"),
        ({"drop_thinking": 1}, ChatSettingsError, "drop_thinking must be"),
    ],
)
def test_bad_settings_are_typed_errors_naming_the_fix(given, error, needle):
    with pytest.raises(error, match=needle):
        ChatSettings(**given)


def test_formats_refuse_settings_they_cannot_render(v4_tok):
    with pytest.raises(UnsupportedSettingError, match="'chatml' does not render tools"):
        get_chat_format("chatml", v4_tok, settings=ChatSettings(tools=TOOLS))
    with pytest.raises(UnsupportedSettingError, match="takes reasoning_effort low, high, xhigh"):
        fmt("deepseek-v4.1", thinking=True, reasoning_effort="medium")
    with pytest.raises(UnsupportedSettingError, match="does not render effort_budgets"):
        fmt("deepseek-v4", effort_budgets="low25-high50")
    with pytest.raises(UnsupportedSettingError, match="does not render reasoning_effort"):
        get_chat_format("hf", v4_tok, settings=ChatSettings(reasoning_effort="low"))
    with pytest.raises(ChatSettingsError, match="inside settings"):
        get_chat_format("deepseek-v4", v4_tok, thinking=True, settings=ChatSettings())


def test_settings_are_copies_and_round_trip():
    tools = [json.loads(json.dumps(TOOLS[0]))]
    chosen = ChatSettings(tools=tools)
    tools[0]["function"]["name"] = "changed"
    assert chosen.tools[0]["function"]["name"] == "search"
    assert ChatSettings.from_dict(chosen.to_dict()) == chosen
    assert hash(ChatSettings.from_dict(chosen.to_dict())) == hash(chosen)
    with pytest.raises(ChatSettingsError, match="unknown chat settings"):
        ChatSettings.from_dict({"thinkng": True})


def test_chat_template_kwargs_state_every_setting():
    assert ChatSettings().chat_template_kwargs("deepseek-v4") == {
        "thinking": False, "enable_thinking": False, "drop_thinking": True,
    }  # fmt: skip
    on = ChatSettings(thinking=True)
    assert on.chat_template_kwargs("deepseek-v4")["reasoning_effort"] == "low"
    assert on.chat_template_kwargs("deepseek-v4.1")["reasoning_effort"] == "high"
    assert (
        ChatSettings(thinking=True, drop_thinking=False).chat_template_kwargs("deepseek-v4")[
            "drop_thinking"
        ]
        is False
    )
    assert on.chat_template_kwargs("hf") == {"thinking": True, "enable_thinking": True}
    assert on.chat_template_kwargs("chatml") == {}
    with pytest.raises(UnsupportedSettingError, match="does not render response_format"):
        ChatSettings(response_format=RESPONSE_FORMAT).chat_template_kwargs("deepseek-v4")
