"""The cache-aware figures counted from the layout equal a full re-tokenization.

``report.prefix.cache_figures`` counts ``unchanged_prefix_tokens`` against the
layout's ``prefix + suffix`` (no render) and from the prompt's verified token
starts (no encode of the shared head); ``unchanged_sent_tokens`` the same way
against the sent text. The oracle is the slow, obvious one: render the prompt
without context, encode both texts in full, count equal leading ids. Cases are
drawn across tokenizers and chat formats, with text on both sides of the slot
that BPE merges across it (letters, digits, spaces, newlines, accents, CJK).
"""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import HealthCheck, assume, event, given, settings
from hypothesis import strategies as st

from phaseaware import assemble, assemble_append
from phaseaware.assembly import AssemblyOptions
from phaseaware.assembly.retokenize.prefix import PrefixTokenCache, shared_tokens
from phaseaware.assembly.retokenize.windowed import full_starts
from phaseaware.chat import conversation_layout, get_chat_format
from phaseaware.chat.append import append_layout, sent_text
from phaseaware.chat.messages import parse_messages
from phaseaware.errors import PhaseawareError
from tests.support.prefix_oracle import oracle, tok

SPECS = ("tiktoken:cl100k_base", "tiktoken:o200k_base", "deepseek-v4")
FORMATS = ("none", "chatml", "deepseek-v4")
PROFILE = "deepseek-v4-flash-base"
QUESTION = "Where was the Zorbia treaty of 1848 signed?"
# pieces BPE merges across a boundary (words, digits, spaces, newlines), splits
# (accents, CJK) or reads as specials ("<|", "|>")
PIECES = st.sampled_from(
    ["a", "ab", "Zorbia", " ", "  ", "\n", "\n\n", "1", "23", ".", "é", "中", "|", "<|", "|>"]
)
EDGE = st.lists(PIECES, min_size=0, max_size=6).map("".join)
WORDS = st.lists(PIECES, min_size=1, max_size=10).map("".join)


def chunk_texts(draw: st.DrawFn) -> list[str]:
    """Two chunks whose first and last characters merge with what sits around the slot."""
    body = "The Zorbia treaty of 1848 was signed in Velmora"
    return [draw(EDGE) + body + draw(EDGE) + ".", draw(EDGE) + "Velmora lies north" + draw(EDGE)]


@st.composite
def slot_cases(draw: st.DrawFn) -> tuple[list[dict[str, str]], list[str]]:
    """A conversation whose last user turn holds the slot between merging text, and chunks."""
    out: list[dict[str, str]] = []
    if draw(st.booleans()):
        out.append({"role": "system", "content": draw(WORDS)})
    for _ in range(draw(st.integers(0, 1))):
        out += [
            {"role": "user", "content": draw(WORDS)},
            {"role": "assistant", "content": draw(WORDS)},
        ]
    before = draw(EDGE)
    after = draw(st.sampled_from(["", "\n\n{question}", " {question}", "{question}", "1"]))
    out.append({"role": "user", "content": before + "{context}" + after})
    return out, chunk_texts(draw)


def _format(spec: str, name: str) -> Any:
    try:
        return get_chat_format(name, tok(spec))
    except PhaseawareError:
        pytest.skip(f"chat format {name} does not load with {spec}")


@pytest.mark.parametrize("name", FORMATS)
@pytest.mark.parametrize("spec", SPECS)
@settings(max_examples=20, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(case=slot_cases(), pad=st.booleans(), single=st.booleans())
def test_unchanged_prefix_equals_full_retokenization(
    spec: str, name: str, case: tuple[list[dict[str, str]], list[str]], pad: bool, single: bool
) -> None:
    t = tok(spec)
    fmt = _format(spec, name)
    messages, chunks = case
    options = AssemblyOptions(pad=pad, allow_tokenizer_mismatch=True)
    profile = PROFILE if spec == "deepseek-v4" else None
    try:
        if single:  # the single-turn call: [system?, user(context + "\n\n" + question)]
            system = messages[0]["content"] if messages[0]["role"] == "system" else None
            layout = conversation_layout(tokenizer=t, chat_format=fmt, system=system)
            result = assemble(
                chunks, tokenizer=t, chat_format=fmt, system=system, question=QUESTION,
                profile=profile, budget_tokens=4000, options=options,
            )  # fmt: skip
        else:
            layout = conversation_layout(
                tokenizer=t, chat_format=fmt, messages=messages, question=QUESTION
            )
            result = assemble(
                chunks, messages=messages, tokenizer=t, chat_format=fmt, question=QUESTION,
                profile=profile, budget_tokens=4000, options=options,
            )  # fmt: skip
        empty = layout.render(system=None, context="", question=QUESTION).text
    except PhaseawareError:
        assume(False)  # a template that refuses the drawn text: nothing to count
        raise
    assert result.unchanged_prefix_tokens == oracle(t, result.prompt, empty)
    assert result.unchanged_sent_tokens is None


@st.composite
def append_cases(draw: st.DrawFn) -> tuple[list[dict[str, str]], str, list[str]]:
    sent: list[dict[str, str]] = [{"role": "user", "content": draw(WORDS)}]
    sent.append({"role": "assistant", "content": draw(WORDS)})
    new = draw(EDGE) + "{context}" + draw(st.sampled_from(["", "\n\n{question}", " 1"]))
    return sent, new, chunk_texts(draw)


@pytest.mark.parametrize("name", ("chatml", "deepseek-v4"))
@pytest.mark.parametrize("spec", SPECS)
@settings(max_examples=12, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(case=append_cases(), reply=WORDS)
def test_append_figures_equal_full_retokenization(
    spec: str, name: str, case: tuple[list[dict[str, str]], str, list[str]], reply: str
) -> None:
    """Both figures on the full path (first step) and the incremental one (second step)."""
    t = tok(spec)
    fmt = _format(spec, name)
    sent, text, chunks = case
    new = {"role": "user", "content": text}
    prefix_cache = PrefixTokenCache()
    paths = []
    for _ in range(2):
        try:
            result = assemble_append(
                sent=sent, new=new, chunks=chunks, tokenizer=t, chat_format=name,
                question=QUESTION, profile=PROFILE, budget_tokens=4000,
                prefix_cache=prefix_cache, options=AssemblyOptions(allow_tokenizer_mismatch=True),
            )  # fmt: skip
            layout = append_layout(
                sent=sent, new=new, chat_format=fmt, question=QUESTION, tokenizer=t
            )
            empty = layout.render(system=None, context="", question=QUESTION).text
        except PhaseawareError:
            assume(False)
            raise
        held = sent_text(sent=parse_messages(sent), chat_format=fmt)
        assert result.unchanged_sent_tokens == oracle(t, result.prompt, held)
        assert result.unchanged_prefix_tokens == oracle(t, result.prompt, empty)
        assert result.messages is not None
        paths.append(result.append_path)
        sent = [*result.messages, {"role": "assistant", "content": reply}]
    event(f"append paths {paths}")


@pytest.mark.parametrize("spec", SPECS)
@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(head=WORDS, x=EDGE, y=EDGE, special=st.booleans())
def test_a_parting_point_without_a_cut_before_it(
    spec: str, head: str, x: str, y: str, special: bool
) -> None:
    """No cut before the parting point (a special token right before it, or a short
    head): the start of the text is the cut, and only the texts up to a cut past the
    parting point are encoded; several others at once, each its own count."""
    t = tok(spec)
    opening = "<｜begin▁of▁sentence｜>" if spec == "deepseek-v4" else "<|endoftext|>"
    head = (opening if special else "") + head
    a, others = head + x + " and more words after it", [head + y, head, head + x]
    starts = full_starts(t, a).starts
    assert shared_tokens(t, a, others, starts=starts) == [oracle(t, a, o) for o in others]
    assert shared_tokens(t, a, others) == [oracle(t, a, o) for o in others]
