"""A DeepSeek target's renderer (vLLM's encoder file, or deepseek-recipe as SGLang drives it)
and V4's effort texts: each rule where the two renderers differ, once (the fuzz against
SGLang's own files: tests/e2e/sglang)."""

from __future__ import annotations

import pytest

from phaseaware.chat.deepseek_v4 import EFFORT_PREAMBLES, EFFORT_TEXTS
from phaseaware.chat.formats import get_chat_format
from phaseaware.chat.messages import parse_messages
from phaseaware.chat.settings import ChatSettings, ChatSettingsError, UnsupportedSettingError

pytest.importorskip("deepseek_recipe")

BOS, USER, ASSISTANT = "<｜begin▁of▁sentence｜>", "<｜User｜>", "<｜Assistant｜>"


def render(name: str, messages: list[dict[str, str]], **settings: object) -> str:
    fmt = get_chat_format(name, None, settings=ChatSettings(**settings))  # type: ignore[arg-type]
    return fmt.render(parse_messages(messages))


def test_settings_name_a_known_renderer_and_texts() -> None:
    with pytest.raises(ChatSettingsError, match="renderer must be 'vllm'"):
        ChatSettings(renderer="tgi")
    with pytest.raises(ChatSettingsError, match="effort_texts must be '0731'"):
        ChatSettings(effort_texts="0801")
    given = ChatSettings(renderer="sglang", effort_texts="preview")
    assert ChatSettings.from_dict(given.to_dict()) == given
    assert "renderer" not in ChatSettings().to_dict()
    with pytest.raises(UnsupportedSettingError, match="does not render effort_texts"):
        get_chat_format("deepseek-v4.1", None, settings=ChatSettings(effort_texts="0731"))  # type: ignore[arg-type]


def test_preview_texts_write_the_first_checkpoints_preambles() -> None:
    hi = [{"role": "user", "content": "hi"}]
    assert EFFORT_TEXTS["0731"] is EFFORT_PREAMBLES
    for effort, text in (("high", ""), ("max", EFFORT_PREAMBLES["high"]), ("low", "")):
        out = render("deepseek-v4", hi, thinking=True, reasoning_effort=effort,
                     effort_texts="preview")  # fmt: skip
        assert out == BOS + text + USER + "hi" + ASSISTANT + "<think>"


def test_where_sglang_and_the_encoder_file_differ() -> None:
    late_system = [{"role": "user", "content": "a"}, {"role": "assistant", "content": "b"},
                   {"role": "system", "content": "S"}, {"role": "user", "content": "c"}]  # fmt: skip
    # V4: recipe moves a late system message to the start; the encoder file writes it in place
    assert render("deepseek-v4", late_system, renderer="sglang").startswith(BOS + "S" + USER)
    assert render("deepseek-v4", late_system).startswith(BOS + USER + "a")
    # developer turns are system turns at SGLang, user turns in the encoder file
    dev = [{"role": "developer", "content": "D"}, {"role": "user", "content": "u"}]
    assert render("deepseek-v4.1", dev, renderer="sglang").startswith(BOS + "<｜System｜>D")
    assert render("deepseek-v4.1", dev).startswith(BOS + USER + "D")
    # two assistant turns in a row: each opens its own turn at SGLang
    pair = [{"role": "user", "content": "u"}, {"role": "assistant", "content": "x"},
            {"role": "assistant", "content": "y"}, {"role": "user", "content": "v"}]  # fmt: skip
    assert ASSISTANT + "</think>y" in render("deepseek-v4", pair, renderer="sglang")
    assert "x<｜end▁of▁sentence｜>y" in render("deepseek-v4", pair)
    # a trailing assistant message is re-sent as a user turn
    tail = [{"role": "user", "content": "u"}, {"role": "assistant", "content": "x"}]
    assert render("deepseek-v4", tail, renderer="sglang").endswith(
        USER + "u\n\nx" + ASSISTANT + "</think>"
    )


def test_sglang_efforts() -> None:
    hi = [{"role": "user", "content": "hi"}]

    def preamble(name: str, effort: object) -> str:
        text = render(name, hi, thinking=True, reasoning_effort=effort, renderer="sglang")
        return text[len(BOS) : text.index(USER)]

    assert preamble("deepseek-v4", None) == EFFORT_PREAMBLES["high"]  # recipe's default
    assert preamble("deepseek-v4", "medium") == EFFORT_PREAMBLES["high"]
    assert preamble("deepseek-v4", "xhigh") == EFFORT_PREAMBLES["high"]
    assert preamble("deepseek-v4", "minimal") == ""
    assert "Reasoning Effort: 75 " in preamble("deepseek-v4.1", "medium")
    assert "Reasoning Effort: 37 " in preamble("deepseek-v4.1", 37)
    assert "Reasoning Effort: 30 " in preamble("deepseek-v4.1", "0.3")
    with pytest.raises(UnsupportedSettingError, match="numeric reasoning_effort on DeepSeek-V4"):
        render("deepseek-v4", hi, thinking=True, reasoning_effort=37, renderer="sglang")
    with pytest.raises(UnsupportedSettingError, match="unknown variant `auto`"):
        render("deepseek-v4", hi, reasoning_effort="auto", renderer="sglang")
    for refused in ({"drop_thinking": False}, {"effort_budgets": "low25-high50"},
                    {"response_format": {"type": "object"}}, {"effort_texts": "preview"}):  # fmt: skip
        with pytest.raises(UnsupportedSettingError, match="served by SGLang does not render"):
            render("deepseek-v4.1" if "effort_budgets" in refused else "deepseek-v4", hi,
                   renderer="sglang", **refused)  # fmt: skip
