"""Append alignment groundwork: sent bytes never change; the count form gives the same tokens."""

from __future__ import annotations

import pytest

from phaseaware.chat import PrefixRewriteError, get_chat_format, parse_messages
from phaseaware.chat.append import append_from_count, append_layout, sent_text
from phaseaware.chat.deepseek_v4 import DeepSeekV4Format
from phaseaware.errors import TemplateError
from phaseaware.tokenizers import load_tokenizer

TOKENIZERS = ["tiktoken:cl100k_base", "tiktoken:o200k_base", "deepseek-v4"]
STABLE = [
    ("none", {}),
    ("chatml", {}),
    ("deepseek-v4", {"thinking": False}),
    ("deepseek-v4", {"thinking": True, "drop_thinking": False}),
]


def _format(name, tokenizer, options):
    if name == "deepseek-v4":
        return DeepSeekV4Format(**options)
    return get_chat_format(name, tokenizer)


def _assistant_call(turn):
    call = {
        "id": f"call_{turn}",
        "type": "function",
        "function": {"name": "search", "arguments": f'{{"query": "part {turn}"}}'},
    }
    return {
        "role": "assistant",
        "content": f"Looking up part {turn}.",
        "reasoning_content": f"need part {turn}",
        "tool_calls": [call],
    }


@pytest.mark.parametrize("spec", TOKENIZERS)
@pytest.mark.parametrize("name, options", STABLE)
def test_twenty_turn_tool_loop_keeps_every_sent_byte(spec, name, options):
    tokenizer = load_tokenizer(spec)
    fmt = _format(name, tokenizer, options)
    sent = [
        {"role": "system", "content": "You are an agent. Cite results."},
        {"role": "user", "content": "Collect all 20 parts of the code."},
    ]
    previous = ""
    for turn in range(20):
        sent.append(_assistant_call(turn))
        new = {"role": "tool", "tool_call_id": f"call_{turn}", "content": "Result:\n{context}"}
        layout = append_layout(sent=sent, new=new, chat_format=fmt, question="the code")
        held = sent_text(sent=parse_messages(sent), chat_format=fmt)
        assert held.startswith(previous)  # the server's cached bytes never change
        context = f"part {turn} is 4{turn}7 — 中文 ✓"
        rendered = layout.render(system=None, context=context, question="the code")
        prefix, suffix = layout.split(system=None, question="the code")
        assert rendered.text == prefix + context + suffix
        assert rendered.text.startswith(held)
        filled = [*sent, {**new, "content": f"Result:\n{context}"}]
        assert rendered.text == fmt.render(parse_messages(filled))
        # the whole render is the sent text plus the new part, token for token where the
        # new part starts with a special token of this tokenizer
        if name == "deepseek-v4" and spec == "deepseek-v4":
            assert tokenizer.encode(rendered.text) == tokenizer.encode(held) + tokenizer.encode(
                rendered.text[len(held) :]
            )
        previous = held
        sent = filled


@pytest.mark.parametrize("thinking", [False, True])
def test_count_form_gives_the_same_positions(thinking):
    tokenizer = load_tokenizer("deepseek-v4")
    fmt = DeepSeekV4Format(thinking=thinking, drop_thinking=False)
    sent = [
        {"role": "user", "content": "Find the code."},
        _assistant_call(0),
    ]
    new = {"role": "tool", "tool_call_id": "call_0", "content": "Result:\n{context}"}
    held = sent_text(sent=parse_messages(sent), chat_format=fmt)
    n_sent = len(tokenizer.encode(held))
    delta = append_from_count(prefix_tokens=n_sent, new=new, chat_format=fmt, tokenizer=tokenizer)
    assert delta.offset_tokens == n_sent
    rendered = delta.render(system=None, context="the code is 417.", question="")
    full = append_layout(sent=sent, new=new, chat_format=fmt).render(
        system=None, context="the code is 417.", question=""
    )
    assert full.text == held + rendered.text
    assert full.context_start == len(held) + rendered.context_start
    assert tokenizer.encode(full.text) == tokenizer.encode(held) + tokenizer.encode(rendered.text)
    assert rendered.messages is None


def test_thinking_with_dropped_reasoning_rewrites_the_prefix():
    fmt = DeepSeekV4Format(thinking=True)  # the official default: drop_thinking=True
    sent = [{"role": "user", "content": "q"}, _assistant_call(0)]
    new = {"role": "tool", "tool_call_id": "call_0", "content": "{context}"}
    with pytest.raises(PrefixRewriteError, match="drop_thinking=False") as info:
        append_layout(sent=sent, new=new, chat_format=fmt)
    # "<think>" after the (no longer last) user turn becomes "</think>"
    assert info.value.char_offset == len("<｜begin▁of▁sentence｜><｜User｜>q<｜Assistant｜><")
    with pytest.raises(PrefixRewriteError):
        append_from_count(
            prefix_tokens=10, new=new, chat_format=fmt, tokenizer=load_tokenizer("deepseek-v4")
        )


def test_appending_to_a_user_turn_rewrites_its_ending():
    sent = [{"role": "user", "content": "q"}]
    new = {"role": "user", "content": "{context}"}
    for fmt in (DeepSeekV4Format(), get_chat_format("chatml", load_tokenizer("deepseek-v4"))):
        with pytest.raises(PrefixRewriteError, match="after the assistant's reply"):
            append_layout(sent=sent, new=new, chat_format=fmt)


def test_count_form_refuses_a_boundary_that_merges():
    tokenizer = load_tokenizer("tiktoken:cl100k_base")
    new = {"role": "user", "content": "{context}"}
    with pytest.raises(TemplateError, match="merges with a sent text"):
        append_from_count(
            prefix_tokens=5, new=new, chat_format=get_chat_format("none", tokenizer),
            tokenizer=tokenizer,
        )  # fmt: skip
