"""Unchanged prefix tokens: exact against the tokenizer's ids, and nothing before the slot moves.

The oracle is the obvious one: encode both texts in full and count equal leading
ids. The fast path (a proven cut, only the text around the parting point encoded)
must agree with it for every text; and assembly must leave every byte before the
context slot as the prompt rendered without context has it.
"""

from __future__ import annotations

import os
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from phaseaware import assemble, assemble_append
from phaseaware.assembly.report.prefix import (
    common_prefix_chars,
    common_prefix_ids,
    unchanged_prefix_tokens,
)
from phaseaware.assembly.retokenize.prefix import prefix_cut
from phaseaware.assembly.retokenize.windowed import full_starts
from phaseaware.chat import conversation_layout, get_chat_format
from phaseaware.tokenizers.base import Tokenizer
from tests.support.prefix_oracle import oracle, tok


def assemble_conversation(messages: Any, chunks: Any, **kwargs: Any) -> Any:
    """A message-list assembly through the one public door."""
    return assemble(chunks, messages=messages, **kwargs)


SPECS = ("tiktoken:cl100k_base", "tiktoken:o200k_base", "deepseek-v4")
FORMATS = {
    "tiktoken:cl100k_base": "chatml",
    "tiktoken:o200k_base": "none",
    "deepseek-v4": "deepseek-v4",
}
PROFILE = "deepseek-v4-flash-base"
QUESTION = "Where was the Zorbia treaty of 1848 signed?"
# pieces that merge, split and carry specials: spaces, newlines, digits, accents, CJK, bars
PIECES = st.sampled_from(
    ["a", "b", " ", "  ", "\n", "\n\n", "1", "23", ".", "é", "中", "|", "<|", "|>", "ab", "Zorbia"]
)
TEXT = st.lists(PIECES, max_size=40).map("".join)


@given(a=st.lists(st.integers(0, 3), max_size=20), b=st.lists(st.integers(0, 3), max_size=20))
def test_common_prefix_ids_is_the_plain_count(a: list[int], b: list[int]) -> None:
    n = 0
    while n < min(len(a), len(b)) and a[n] == b[n]:
        n += 1
    assert common_prefix_ids(a, b) == n


@given(a=TEXT, b=TEXT)
def test_common_prefix_chars_is_os_commonprefix(a: str, b: str) -> None:
    assert common_prefix_chars(a, b) == len(os.path.commonprefix([a, b]))


@pytest.mark.parametrize("spec", SPECS)
@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(head=TEXT, x=TEXT, y=TEXT, long=st.booleans(), with_starts=st.booleans())
def test_unchanged_prefix_equals_the_id_oracle(
    spec: str, head: str, x: str, y: str, long: bool, with_starts: bool
) -> None:
    t = tok(spec)
    head = ("The history so far. " * 30 + head) if long else head
    a, b = head + x, head + y
    starts = full_starts(t, a).starts if with_starts else None
    assert unchanged_prefix_tokens(t, a, b, starts=starts) == oracle(t, a, b)


def test_a_tokenizer_without_cuts_encodes_both(minimal_tokenizer: Tokenizer) -> None:
    assert prefix_cut(minimal_tokenizer, "some words here")[0] is None
    a, b = "same words then this", "same words then that"
    assert unchanged_prefix_tokens(minimal_tokenizer, a, b) == oracle(minimal_tokenizer, a, b)


CHUNKS = [
    "The Zorbia treaty of 1848 was signed in the harbour town of Velmora.",
    "Velmora lies on the northern coast; its harbour freezes two months a year.",
]
WORDS = st.lists(PIECES, min_size=1, max_size=12).map("".join)


@st.composite
def conversations(draw: st.DrawFn) -> list[dict[str, str]]:
    """system?, a history of user/assistant turns, then a user turn holding the slot."""
    out: list[dict[str, str]] = []
    if draw(st.booleans()):
        out.append({"role": "system", "content": draw(WORDS)})
    for _ in range(draw(st.integers(0, 2))):
        out += [
            {"role": "user", "content": draw(WORDS)},
            {"role": "assistant", "content": draw(WORDS)},
        ]
    before, after = draw(WORDS), draw(st.sampled_from(["", "\n\n{question}", " {question}"]))
    out.append({"role": "user", "content": before + "{context}" + after})
    return out


@pytest.mark.parametrize("spec", SPECS)
@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(messages=conversations(), chunks=st.permutations(CHUNKS), pad=st.booleans())
def test_assembly_never_changes_a_byte_before_the_slot(
    spec: str, messages: list[dict[str, str]], chunks: list[str], pad: bool
) -> None:
    from phaseaware.assembly import AssemblyOptions

    t = tok(spec)
    fmt = get_chat_format(FORMATS[spec], t)
    result = assemble_conversation(
        messages, chunks, tokenizer=t, chat_format=fmt, question=QUESTION,
        profile=PROFILE if spec == "deepseek-v4" else None, budget_tokens=4000,
        options=AssemblyOptions(pad=pad),
    )  # fmt: skip
    layout = conversation_layout(tokenizer=t, chat_format=fmt, messages=messages, question=QUESTION)
    slot = len(layout.split(system=None, question=QUESTION)[0])
    empty = layout.render(system=None, context="", question=QUESTION).text
    assert result.prompt[:slot] == empty[:slot]  # text: every byte before the slot
    assert result.unchanged_prefix_tokens == oracle(t, result.prompt, empty)
    # ids: equal through the last token no continuation can merge with (a proven cut)
    cut, _ = prefix_cut(t, empty[:slot]) if slot > 1 else (None, "")
    if cut is not None:
        assert result.unchanged_prefix_tokens >= len(t.encode(empty[:cut]))


def test_append_reports_tokens_unchanged_since_the_sent_conversation() -> None:
    """Both counts equal the id oracle on the full path and on the incremental one."""
    from phaseaware.assembly.retokenize.prefix import PrefixTokenCache
    from phaseaware.chat.append import append_layout, sent_text
    from phaseaware.chat.messages import parse_messages

    t = tok("deepseek-v4")
    fmt = get_chat_format("deepseek-v4", t)
    cache = PrefixTokenCache()
    sent: list[dict[str, str]] = [
        {"role": "system", "content": "You look things up. " * 20},
        {"role": "user", "content": "Where was the treaty signed?"},
        {"role": "assistant", "content": "Let me search."},
    ]
    new = {"role": "user", "content": "Results:\n{context}\n\n{question}"}
    paths = []
    for step in range(2):
        result = assemble_append(
            sent=sent, new=new, chunks=CHUNKS, tokenizer=t, chat_format="deepseek-v4",
            question=QUESTION, profile=PROFILE, budget_tokens=4000, prefix_cache=cache,
        )  # fmt: skip
        paths.append(result.append_path)
        held = sent_text(sent=parse_messages(sent), chat_format=fmt)
        layout = append_layout(sent=sent, new=new, chat_format=fmt, question=QUESTION, tokenizer=t)
        empty = layout.render(system=None, context="", question=QUESTION).text
        assert result.unchanged_sent_tokens == oracle(t, result.prompt, held) > 0
        assert result.unchanged_prefix_tokens == oracle(t, result.prompt, empty)
        plain = result.to_dict()
        assert plain["unchanged_sent_tokens"] == result.unchanged_sent_tokens
        assert plain["unchanged_prefix_tokens"] == result.unchanged_prefix_tokens
        assert result.messages is not None
        sent = [*result.messages, {"role": "assistant", "content": f"Step {step} read."}]
    assert paths == ["full", "incremental"]


def test_single_call_has_no_sent_field() -> None:
    t = tok("tiktoken:o200k_base")
    result = assemble_conversation(
        [{"role": "user", "content": "{context}\n\n{question}"}], CHUNKS, tokenizer=t,
        chat_format="chatml", question=QUESTION, budget_tokens=2000,
    )  # fmt: skip
    assert result.unchanged_sent_tokens is None
    assert "unchanged_sent_tokens" not in result.to_dict()
    assert result.to_dict()["unchanged_prefix_tokens"] == result.unchanged_prefix_tokens > 0


def test_cli_report_names_the_unchanged_prefix() -> None:
    from phaseaware.cli.assemble_cmd import format_report

    t = tok("tiktoken:o200k_base")
    result = assemble_conversation(
        [{"role": "user", "content": "{context}\n\n{question}"}], CHUNKS, tokenizer=t,
        chat_format="chatml", question=QUESTION, budget_tokens=2000,
    )  # fmt: skip
    line = f"unchanged prefix: {result.unchanged_prefix_tokens} of {result.token_count} tokens"
    assert line in format_report(result)


def test_count_form_reports_the_same_counts_as_the_text_form() -> None:
    from phaseaware.chat.append import sent_text
    from phaseaware.chat.messages import parse_messages

    t = tok("deepseek-v4")
    sent = [
        {"role": "user", "content": "Where was the treaty signed?"},
        {"role": "assistant", "content": "Let me search."},
    ]
    held = sent_text(sent=parse_messages(sent), chat_format=get_chat_format("deepseek-v4", t))
    kwargs = dict(
        new={"role": "user", "content": "Results:\n{context}\n\n{question}"}, chunks=CHUNKS,
        tokenizer=t, chat_format="deepseek-v4", question=QUESTION, profile=PROFILE,
        budget_tokens=4000,
    )  # fmt: skip
    full = assemble_append(sent=sent, prefix_cache=None, **kwargs)  # type: ignore[arg-type]
    cheap = assemble_append(prefix_tokens=len(t.encode(held)), **kwargs)  # type: ignore[arg-type]
    assert held + cheap.prompt == full.prompt
    assert cheap.unchanged_prefix_tokens == full.unchanged_prefix_tokens
    assert cheap.unchanged_sent_tokens == full.unchanged_sent_tokens == len(t.encode(held))


def test_robust_copies_are_counted_on_the_final_prompt() -> None:
    from phaseaware.assembly import AssemblyOptions

    t = tok("deepseek-v4")
    messages = [
        {"role": "system", "content": "Answer from the documents. " * 10},
        {"role": "user", "content": "{context}\n\n{question}"},
    ]
    result = assemble_conversation(
        messages, CHUNKS, tokenizer=t, chat_format="deepseek-v4", question=QUESTION,
        profile=PROFILE, budget_tokens=4000, options=AssemblyOptions(offsets=(0, 1, 2)),
    )  # fmt: skip
    assert result.robust is not None
    fmt = get_chat_format("deepseek-v4", t)
    layout = conversation_layout(tokenizer=t, chat_format=fmt, messages=messages, question=QUESTION)
    empty = layout.render(system=None, context="", question=QUESTION).text
    assert result.unchanged_prefix_tokens == oracle(t, result.prompt, empty) > 0


def test_hf_template_without_a_cut_rule(reference_tokenizer: Tokenizer) -> None:
    """A tokenizer with no proven cut: both texts encoded in full, same count."""
    assert prefix_cut(reference_tokenizer, "Answer briefly. " * 8)[0] is None
    messages = [
        {"role": "system", "content": "Answer briefly."},
        {"role": "user", "content": "Documents:\n{context}\n\nQuestion: {question}"},
    ]
    fmt = get_chat_format("hf", reference_tokenizer)
    result = assemble_conversation(
        messages, CHUNKS, tokenizer=reference_tokenizer, chat_format=fmt, question=QUESTION,
        budget_tokens=4000,
    )  # fmt: skip
    layout = conversation_layout(
        tokenizer=reference_tokenizer, chat_format=fmt, messages=messages, question=QUESTION
    )
    slot = len(layout.split(system=None, question=QUESTION)[0])
    empty = layout.render(system=None, context="", question=QUESTION).text
    assert result.prompt[:slot] == empty[:slot]
    assert result.unchanged_prefix_tokens == oracle(reference_tokenizer, result.prompt, empty) > 0
