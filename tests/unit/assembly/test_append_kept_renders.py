"""An agent step whose renders reuse kept renders of the conversation's start gives the
result of whole renders, in every format that keeps them (chatml, none, deepseek-v4, and
hf with a template proven message-wise: SmolLM2's).

Random tool loops (tool calls, system and user messages between calls, adversarial text
at the boundaries), and now and then an edit of an earlier message (nothing kept for the
old text may be reused): at each step ``assemble_append`` with kept renders and the
prefix token cache equals ``assemble_append`` after every kept render is dropped and
without the prefix token cache, in prompt, report and messages.
"""

from __future__ import annotations

import json
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from phaseaware import AssemblyOptions, Chunk, assemble_append, get_profile
from phaseaware.assembly.retokenize.prefix import PrefixTokenCache
from phaseaware.chat import deepseek_encoding, hf, message_wise
from phaseaware.errors import PhaseawareError
from tests.support.smollm2 import template

PROFILE = get_profile("deepseek-v4-flash-base")
OPTIONS = AssemblyOptions(repeat=False, allow_tokenizer_mismatch=True)
TEXT = st.lists(
    st.sampled_from(["a", "é", "中", " ", "\n", "\n\n", "|", "<", ">", "<|", "x.", "9", ""]),
    max_size=6,
).map("".join)
WORDS = st.lists(st.sampled_from("amber harbor ledger 42 the of café".split()), max_size=20)


@st.composite
def loops(draw: st.DrawFn) -> list[dict[str, Any]]:
    return [
        {
            "chunks": [draw(TEXT) + " ".join(draw(WORDS)) + f" code {n}-{k}." for k in range(2)],
            "head": draw(TEXT),
            "tail": draw(TEXT),
            "args": draw(TEXT),
            "between": draw(st.sampled_from([None, "user", "system"])),
            "edit": draw(st.integers(0, 5)) == 0,  # change an earlier message's text
        }
        for n in range(draw(st.integers(1, 12)))
    ]


def _forget() -> None:
    deepseek_encoding._RENDERS.clear()
    message_wise._KEPT.clear()
    hf._KEPT.clear()
    hf._ENDS.clear()


def _step(kwargs: dict[str, Any], cache: PrefixTokenCache) -> Any:
    """The step with kept renders and the prefix token cache, checked against a step of
    whole renders and full re-tokenization; raises what both raise."""
    try:
        fast = assemble_append(**kwargs, prefix_cache=cache)
    except PhaseawareError as exc:
        _forget()
        with pytest.raises(type(exc)) as raised:
            assemble_append(**kwargs, prefix_cache=None)
        assert str(raised.value) == str(exc)
        raise
    _forget()
    whole = assemble_append(**kwargs, prefix_cache=None)
    assert fast.prompt == whole.prompt
    assert fast.to_dict() == whole.to_dict()
    assert fast.messages == whole.messages
    return fast


def _run(tokenizer: Any, chat_format: str, steps: list[dict[str, Any]]) -> None:
    _forget()
    cache = PrefixTokenCache()
    sent: list[dict[str, Any]] = [
        {"role": "system", "content": "Agent."},
        {"role": "user", "content": "Find every code."},
    ]
    for n, step in enumerate(steps):
        arguments = json.dumps({"q": step["args"]}, ensure_ascii=False)
        call = {"id": f"c{n}", "type": "function",
                "function": {"name": "search", "arguments": arguments}}  # fmt: skip
        sent.append({"role": "assistant", "content": step["head"], "tool_calls": [call]})
        new = {"role": "tool", "tool_call_id": f"c{n}",
               "content": step["head"] + "{context}" + step["tail"]}  # fmt: skip
        chunks = [Chunk(text=t, id=f"s{n}c{k}", score=1 - k / 10, evidence=(f"{n}-{k}",))
                  for k, t in enumerate(step["chunks"])]  # fmt: skip
        kwargs = dict(
            sent=list(sent), new=new, chunks=chunks, tokenizer=tokenizer,
            chat_format=chat_format, question=f"What is code {n}?", profile=PROFILE,
            budget_tokens=1_000_000, options=OPTIONS,
        )  # fmt: skip
        try:
            result = _step(kwargs, cache)
        except PhaseawareError:
            return  # both paths raised the same error
        filled = {**new, "content": step["head"] + result.context + step["tail"]}
        sent = [*sent, filled] if result.messages is None else list(result.messages)
        if step["between"] is not None:  # the model answered before its next call
            sent += [
                {"role": "assistant", "content": "ok" + step["tail"]},
                {"role": step["between"], "content": "go on" + step["head"]},
            ]
        if step["edit"]:  # an earlier message changed: kept renders of it are stale
            i = (n * 7) % (len(sent) - 1)
            sent[i] = {**sent[i], "content": str(sent[i]["content"]) + "!"}


_SETTINGS = settings(
    max_examples=8, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)


@pytest.mark.parametrize("chat_format", ["chatml", "none"])
@_SETTINGS
@given(steps=loops())
def test_kept_renders_give_the_whole_render_result_tiktoken(cl100k, chat_format, steps):
    _run(cl100k, chat_format, steps)


@pytest.mark.parametrize("chat_format", ["chatml", "deepseek-v4"])
@_SETTINGS
@given(steps=loops())
def test_kept_renders_give_the_whole_render_result_deepseek(deepseek_v4, chat_format, steps):
    _run(deepseek_v4, chat_format, steps)


@_SETTINGS
@given(steps=loops())
def test_kept_renders_give_the_whole_render_result_hf(smollm2_template_tokenizer, steps):
    _run(smollm2_template_tokenizer, "hf", steps)


@pytest.fixture(scope="module")
def smollm2_template_tokenizer() -> Any:
    pytest.importorskip("transformers")
    from tests.support.templated import deepseek_with_template

    return deepseek_with_template(template("smollm2"), spec="deepseek-v4+smollm2")
