"""Incremental append alignment equals the full re-tokenization at every step.

Random tool loops (1-40 steps; thinking on and off; tool calls; unicode,
``|``, ``<``, digits, spaces and newlines at every message boundary), with the
DeepSeek-V4 tokenizer + ``deepseek-v4`` format and tiktoken cl100k + ``chatml``:
at each step ``assemble_append`` with a prefix cache (incremental from step 2)
and without one (the full path) give the same prompt, token ids, placements
and report, and the cached token starts of the prompt are those of one full
encode. ``prefix_cut`` itself is checked on adversarial texts, and the cache's
caps (entries, bytes) hold.
"""

from __future__ import annotations

import json
from typing import Any

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from phaseaware import AssemblyOptions, Chunk, assemble_append, get_profile
from phaseaware.assembly.retokenize.prefix import PrefixEntry, PrefixTokenCache, prefix_cut
from phaseaware.chat import get_chat_format
from phaseaware.errors import PhaseawareError

PROFILE = get_profile("deepseek-v4-flash-base")
OPTIONS = AssemblyOptions(repeat=False, allow_tokenizer_mismatch=True)
# boundary material: letters, digits, CJK, kana, combining marks, ZWJ emoji, pipes,
# angle brackets, whitespace runs, and pieces of control-token spellings
ALPHABET = st.sampled_from(
    list("aZé中ぁカ0 9\n\t|<>.!'_-") + ["\u0301", "👩\u200d💻", "  ", "\n\n", "<|", "|>", "｜", "▁"]
)
TEXT = st.lists(ALPHABET, max_size=12).map("".join)
WORDS = st.lists(st.sampled_from("amber harbor ledger 42 the of 中文 café".split()), max_size=30)


@st.composite
def loops(draw: st.DrawFn) -> list[dict[str, Any]]:
    steps = []
    for n in range(draw(st.integers(1, 40))):
        chunks = [
            {
                "text": draw(TEXT) + " ".join(draw(WORDS)) + f" code {n}-{k}. " + draw(TEXT),
                "evidence": f"{n}-{k}",
            }
            for k in range(draw(st.integers(1, 3)))
        ]
        steps.append(
            {
                "chunks": chunks,
                "head": draw(TEXT),  # the tool message's text before {context}
                "tail": draw(TEXT),
                "reply": draw(TEXT) if draw(st.booleans()) else None,  # text between calls
                "reasoning": draw(TEXT),
                "args": draw(TEXT),
            }
        )
    return steps


def _chunks(step: dict[str, Any], n: int) -> list[Chunk]:
    return [
        Chunk(text=c["text"], score=1.0 - k / 10, id=f"s{n}c{k}", evidence=(c["evidence"],))
        for k, c in enumerate(step["chunks"])
    ]


def _run_loop(tokenizer: Any, chat_format: Any, steps: list[dict[str, Any]], thinking: bool):
    cache = PrefixTokenCache()
    fp = tokenizer.fingerprint()
    sent: list[dict[str, Any]] = [
        {"role": "system", "content": "Agent."},
        {"role": "user", "content": "Find every code."},
    ]
    paths = []
    for n, step in enumerate(steps):
        call = {
            "id": f"call_{n}",
            "type": "function",
            "function": {"name": "search", "arguments": json.dumps({"q": step["args"]})},
        }
        turn: dict[str, Any] = {"role": "assistant", "content": "", "tool_calls": [call]}
        if thinking:
            turn["reasoning_content"] = step["reasoning"]
        sent.append(turn)
        new = {
            "role": "tool",
            "tool_call_id": f"call_{n}",
            "content": step["head"] + "{context}" + step["tail"],
        }
        kwargs = dict(
            sent=sent, new=new, chunks=_chunks(step, n), tokenizer=tokenizer,
            chat_format=chat_format, question=f"What is code {n}?", profile=PROFILE,
            budget_tokens=1_000_000, options=OPTIONS,
        )  # fmt: skip
        try:
            full = assemble_append(**kwargs, prefix_cache=None)
        except PhaseawareError as exc:  # e.g. pads that adversarial text never confirms:
            with pytest.raises(type(exc)) as raised:  # the incremental path raises the same
                assemble_append(**kwargs, prefix_cache=cache)
            assert str(raised.value) == str(exc)
            return
        fast = assemble_append(**kwargs, prefix_cache=cache)
        assert fast.prompt == full.prompt
        assert fast.to_dict() == full.to_dict()  # placements, residues, accuracies, report
        assert fast.messages == full.messages
        entry = cache.longest_prefix_of(fp, fast.prompt)
        assert entry is not None and entry.text == fast.prompt
        truth = tokenizer.tokenize(fast.prompt)
        assert entry.starts.tolist() == list(truth.starts)  # the cached tokens are exact
        assert len(truth.ids) == fast.token_count
        paths.append(fast.append_path)
        sent = list(fast.messages)
        if step["reply"] is not None:  # the model answered in text before its next call
            reply: dict[str, Any] = {"role": "assistant", "content": step["reply"] + "."}
            if thinking:
                reply["reasoning_content"] = step["reasoning"]
            sent += [reply, {"role": "user", "content": "Go on " + step["head"]}]
    assert paths[0] == "full"
    assert all(p == "incremental" for p in paths[1:]), paths


_SETTINGS = settings(
    max_examples=6, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)


@pytest.mark.parametrize("thinking", [False, True])
@_SETTINGS
@given(steps=loops())
def test_deepseek_v4_loop_incremental_equals_full(deepseek_v4, thinking, steps):
    fmt = get_chat_format("deepseek-v4", deepseek_v4, thinking=thinking, drop_thinking=False)
    _run_loop(deepseek_v4, fmt, steps, thinking)


@_SETTINGS
@given(steps=loops())
def test_chatml_tiktoken_loop_incremental_equals_full(cl100k, steps):
    _run_loop(cl100k, "chatml", steps, thinking=False)


@settings(
    max_examples=300, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(prefix=st.lists(TEXT, min_size=1, max_size=8).map("".join), more=TEXT)
@pytest.mark.parametrize("name", ["deepseek_v4", "cl100k"])
def test_prefix_cut_is_sound_for_any_continuation(request, name, prefix, more):
    tokenizer = request.getfixturevalue(name)
    text = "<|im_start|>user\n<｜User｜>" + prefix
    cut, why = prefix_cut(tokenizer, text)
    if cut is None:
        assert why
        return
    assert 0 < cut < len(text)
    whole = tokenizer.tokenize(text + more)
    alone = tokenizer.tokenize(text)
    k = int(np.searchsorted(np.asarray(alone.starts), cut))
    tail = tokenizer.tokenize((text + more)[cut:])
    assert list(whole.starts) == list(alone.starts[:k]) + [s + cut for s in tail.starts]
    assert list(whole.ids) == list(alone.ids[:k]) + list(tail.ids)


def test_no_profile_or_offsets_or_no_cache_take_the_full_path_and_say_why(deepseek_v4):
    cache = PrefixTokenCache()
    sent = [{"role": "user", "content": "hi"}, {"role": "assistant", "content": "", "tool_calls": [
        {"id": "c", "type": "function", "function": {"name": "f", "arguments": "{}"}}]}]  # fmt: skip
    new = {"role": "tool", "tool_call_id": "c", "content": "R:\n{context}"}
    base = dict(sent=sent, new=new, chunks=["alpha beta 12."], tokenizer=deepseek_v4,
                chat_format="deepseek-v4", question="beta?", budget_tokens=5000)  # fmt: skip
    first = assemble_append(**base, profile=PROFILE, prefix_cache=cache)
    assert (first.append_path, "not seen" in first.append_reason) == ("full", True)
    again = [*first.messages, {"role": "assistant", "content": "ok"}]
    new2 = {"role": "user", "content": "more:\n{context}"}
    step = dict(base, sent=again, new=new2)
    assert assemble_append(**step, profile=PROFILE, prefix_cache=cache).append_path == "incremental"
    plain = assemble_append(**step, profile=None, prefix_cache=cache)
    assert plain.append_path == "full" and "no profile" in plain.append_reason
    robust = assemble_append(
        **step, profile=PROFILE, prefix_cache=cache,
        options=AssemblyOptions(repeat=False, offsets=(0, 1)),
    )  # fmt: skip
    assert robust.append_path == "full" and "offsets" in robust.append_reason
    off = assemble_append(**step, profile=PROFILE, prefix_cache=None)
    assert off.append_path == "full" and "prefix_cache=None" in off.append_reason


def test_prefix_cache_is_capped_in_entries_and_bytes():
    cache = PrefixTokenCache(max_entries=3, max_bytes=10_000)
    for n in range(10):
        text = "x" * (100 + n)
        cache.put("fp", PrefixEntry(text, np.arange(len(text), dtype=np.int32)))
        assert len(cache) <= 3 and cache.nbytes <= 10_000
    assert cache.longest_prefix_of("fp", "x" * 109 + "y").text == "x" * 109
    assert cache.longest_prefix_of("other", "x" * 200) is None
    big = "y" * 20_000
    cache.put("fp", PrefixEntry(big, np.arange(len(big), dtype=np.int32)))  # over the cap: skipped
    assert cache.longest_prefix_of("fp", big) is None
    cache.clear()
    assert len(cache) == 0 and cache.nbytes == 0
    with pytest.raises(ValueError):
        PrefixTokenCache(max_entries=-1)
