"""Chat formats and ConversationLayout: today's shape byte-identical, template fidelity errors."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import pytest
from jinja2.sandbox import ImmutableSandboxedEnvironment

from phaseaware.chat import (
    CHAT_FORMAT_NAMES,
    ChatFormat,
    ConversationLayout,
    TemplateRewriteError,
    conversation_layout,
    get_chat_format,
    parse_conversation,
)
from phaseaware.chat.hf import HFChatFormat
from phaseaware.chat.layout import PromptLayout
from phaseaware.errors import InputError, TemplateError
from phaseaware.tokenizers import load_tokenizer
from tests.support.optional import SMOLLM2_SPEC, needs_smollm2

SMOLLM2 = SMOLLM2_SPEC
V3_TEMPLATE = Path(__file__).parents[1] / "chat_templates" / "deepseek_v3.jinja"
TOKENIZERS = ["tiktoken:cl100k_base", "tiktoken:o200k_base", "deepseek-v4", SMOLLM2, "reference"]
CASES = [
    pytest.param(name, spec, marks=needs_smollm2) if spec == SMOLLM2 else (name, spec)
    for spec in TOKENIZERS
    for name in CHAT_FORMAT_NAMES
    if not (name == "hf" and spec not in (SMOLLM2, "reference"))
]


def _single_turn_text(name, tokenizer, *, system, context, question, thinking):
    """The single-turn prompt written out by hand per format (the reference the one
    renderer is checked against; ``hf``: the raw template, without phaseaware's checks)."""
    user = context + "\n\n" + question
    if name == "none":
        return tokenizer.bos_text + (system + "\n\n" if system else "") + user
    if name == "chatml":
        turn = "<|im_start|>{}\n{}<|im_end|>\n".format
        head = turn("system", system) if system else ""
        return tokenizer.bos_text + head + turn("user", user) + "<|im_start|>assistant\n"
    opener = "<think>" if thinking else "</think>"
    if name == "deepseek-v4":
        return f"<｜begin▁of▁sentence｜>{system or ''}<｜User｜>{user}<｜Assistant｜>{opener}"
    if name == "deepseek-v4.1":  # a system turn of its own; thinking: the effort line (75)
        effort = (
            "Reasoning Effort: 75 (range 1-100, the higher the value, the more thorough the "
            "reasoning)\n\n"
        )
        head = "<｜System｜>" + effort + (system or "") if thinking else ""
        head = head or ("<｜System｜>" + system if system else "")
        return f"<｜begin▁of▁sentence｜>{head}<｜User｜>{user}<｜Assistant｜>{opener}"
    messages = [{"role": "system", "content": system}] if system else []
    messages.append({"role": "user", "content": user})
    return tokenizer.render_chat(
        messages, add_generation_prompt=True, enable_thinking=thinking, thinking=thinking
    )


@pytest.mark.parametrize("name, spec", CASES)
@pytest.mark.parametrize("thinking", [False, True])
@pytest.mark.parametrize("system", [None, "", "You answer {question} briefly.\n"])
def test_todays_shape_matches_the_formats_written_out(name, spec, thinking, system):
    tokenizer = load_tokenizer(spec)
    new = conversation_layout(
        tokenizer=tokenizer, chat_format=name, system=system, thinking=thinking
    )
    # (the reference model's template folds a system message into the first user turn)
    assert isinstance(new, PromptLayout) and new.name == name
    for context in ["", "Doc 1: the key is 42.\n\nDoc 2: 中文 🎉", "{context} {question}"]:
        for question in ["What is the key?", "{context}?"]:
            text = _single_turn_text(
                name, tokenizer, system=system, context=context, question=question,
                thinking=thinking,
            )  # fmt: skip
            rendered = new.render(system=None, context=context, question=question)
            prefix, suffix = new.split(system=None, question=question)
            assert rendered.text == text == prefix + context + suffix
            assert rendered.context == context and rendered.context_start == len(prefix)
            expected_messages = [{"role": "system", "content": system}] if system else []
            expected_messages.append({"role": "user", "content": context + "\n\n" + question})
            assert rendered.messages == (None if name == "none" else tuple(expected_messages))


def test_conversation_layout_rejects_system_argument_and_bad_types():
    layout = conversation_layout(tokenizer=load_tokenizer("deepseek-v4"), chat_format="chatml")
    with pytest.raises(InputError, match="system=None"):
        layout.split(system="S", question="q")
    with pytest.raises(InputError, match="context must be a string"):
        layout.render(system=None, context=3, question="q")
    with pytest.raises(InputError, match="question must be a string"):
        layout.split(system=None, question=None)
    with pytest.raises(InputError, match="inside messages"):
        conversation_layout(
            tokenizer=load_tokenizer("deepseek-v4"),
            chat_format="chatml",
            system="S",
            messages=[{"role": "user", "content": "{context}"}],
        )
    with pytest.raises(TemplateError, match="unknown chat format"):
        get_chat_format("alpaca", load_tokenizer("deepseek-v4"))
    with pytest.raises(TemplateError, match="no chat template"):
        get_chat_format("hf", load_tokenizer("tiktoken:cl100k_base"))


def test_langchain_shaped_template_context_in_system_question_last():
    messages = [
        {"role": "system", "content": "Use the context to answer.\n\n{context}"},
        {"role": "user", "content": "Hi"},
        {"role": "assistant", "content": "Hello! Ask away."},
        {"role": "user", "content": "{question}"},
    ]
    for spec in ["tiktoken:cl100k_base", "tiktoken:o200k_base", "deepseek-v4"]:
        tokenizer = load_tokenizer(spec)
        layout = conversation_layout(
            tokenizer=tokenizer, chat_format="deepseek-v4", messages=messages, question="Who?"
        )
        rendered = layout.render(system=None, context="CTX", question="Who?")
        assert rendered.text == (
            "<｜begin▁of▁sentence｜>Use the context to answer.\n\nCTX<｜User｜>Hi"
            "<｜Assistant｜></think>Hello! Ask away.<｜end▁of▁sentence｜><｜User｜>Who?"
            "<｜Assistant｜></think>"
        )
        assert layout.question == "Who?" and layout.slot_index == 0
        assert rendered.messages[3] == {"role": "user", "content": "Who?"}


class _JinjaTokenizer:
    """A minimal ChatTemplateTokenizer around a Jinja string (what apply_chat_template does)."""

    def __init__(self, template: str) -> None:
        self.spec = "jinja-test"
        self.chat_template = template
        self._template = ImmutableSandboxedEnvironment().from_string(template)

    def render_chat(
        self,
        messages: Sequence[Mapping[str, Any]],
        *,
        add_generation_prompt: bool = True,
        **kwargs: Any,
    ) -> str:
        return self._template.render(
            messages=list(messages),
            add_generation_prompt=add_generation_prompt,
            bos_token="<s>",
            **kwargs,
        )


CHATML_JINJA = (
    "{% for m in messages %}<|im_start|>{{ m['role'] }}\n{{ CONTENT }}<|im_end|>\n{% endfor %}"
    "{% if add_generation_prompt %}<|im_start|>assistant\n{% endif %}"
)
MESSAGES = [
    {"role": "system", "content": "Be exact."},
    {"role": "user", "content": "Context:\n{context}"},
    {"role": "user", "content": "  {question}  "},
]


def _hf(template: str) -> ChatFormat:
    return HFChatFormat(_JinjaTokenizer(template))


@pytest.mark.parametrize(
    "template, index, change",
    [
        (CHATML_JINJA.replace("CONTENT", "m['content'] | trim"), 2, "stripped whitespace"),
        (
            CHATML_JINJA.replace("{% for m in messages %}", "{% for m in messages %}"
                                 "{% if m['role'] != 'system' %}").replace(
                "{% endfor %}", "{% endif %}{% endfor %}").replace("CONTENT", "m['content']"),
            0, "dropped",
        ),
        (CHATML_JINJA.replace("CONTENT", "m['content'] + m['content']"), 0, "repeated"),
        (CHATML_JINJA.replace("CONTENT", "m['content'] | upper"), 0, "rewritten"),
        (V3_TEMPLATE.read_text(encoding="utf-8"), None, None),
    ],
)  # fmt: skip
def test_hf_template_that_changes_a_message_is_named(template, index, change):
    layout = ConversationLayout(parse_conversation(MESSAGES), _hf(template))
    if change is None:  # V3 keeps a leading system message and writes text verbatim
        layout.render(system=None, context="C", question="Q")
        return
    with pytest.raises(TemplateRewriteError, match=f"message {index}") as info:
        layout.render(system=None, context="C", question="Q")
    assert (info.value.index, info.value.change) == (index, change)


def test_hf_deepseek_v3_template_moves_a_late_system_message():
    messages = [*MESSAGES, {"role": "system", "content": "Late rule."}]
    layout = ConversationLayout(
        parse_conversation(messages), _hf(V3_TEMPLATE.read_text(encoding="utf-8"))
    )
    with pytest.raises(TemplateRewriteError, match="moves before message 2") as info:
        layout.split(system=None, question="Q")
    assert (info.value.index, info.value.change) == (3, "moved")


def test_hf_rewrite_found_only_once_context_is_in():
    # the slot sits at the edge of a trimmed message: whitespace in the context is lost
    layout = ConversationLayout(
        parse_conversation([{"role": "user", "content": "{context}"}]),
        _hf(CHATML_JINJA.replace("CONTENT", "m['content'] | trim")),
    )
    assert layout.render(system=None, context="x", question="q").context == "x"
    with pytest.raises(TemplateRewriteError, match="strip leading/trailing whitespace"):
        layout.render(system=None, context=" x ", question="q")


def test_plain_and_chatml_multi_turn():
    messages = [
        {"role": "system", "content": "S"},
        {"role": "user", "content": "{context}"},
        {
            "role": "assistant",
            "content": "",
            "tool_calls": [
                {"id": "a", "type": "function", "function": {"name": "f", "arguments": "{}"}}
            ],
        },
        {"role": "tool", "tool_call_id": "a", "content": "R"},
    ]
    tokenizer = load_tokenizer("tiktoken:cl100k_base")
    plain = conversation_layout(tokenizer=tokenizer, chat_format="none", messages=messages)
    bos = tokenizer.bos_text
    assert plain.render(system=None, context="C", question="").text == bos + "S\n\nC\n\n\n\nR"
    assert plain.render(system=None, context="C", question="").messages is None
    chatml = conversation_layout(tokenizer=tokenizer, chat_format="chatml", messages=messages)
    assert chatml.render(system=None, context="C", question="").text == bos + (
        "<|im_start|>system\nS<|im_end|>\n<|im_start|>user\nC<|im_end|>\n"
        '<|im_start|>assistant\n\n<tool_call>\n{"name": "f", "arguments": {}}\n</tool_call>'
        "<|im_end|>\n<|im_start|>tool\nR<|im_end|>\n<|im_start|>assistant\n"
    )


def test_the_hf_extra_installs_jinja2():
    # apply_chat_template needs jinja2, which transformers does not install (issue 21)
    import tomllib

    root = Path(__file__).resolve().parents[3]
    extras = tomllib.loads((root / "pyproject.toml").read_text(encoding="utf-8"))["project"]
    assert any(dep.startswith("jinja2") for dep in extras["optional-dependencies"]["hf"])
