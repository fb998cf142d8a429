"""An agent step never stops on the encoder's own drop rule.

DeepSeek thinking mode (``drop_thinking``, the encoder's default) drops earlier reasoning
when a tool or user message arrives, so appending re-renders text already sent. The step
then assembles the whole conversation: positions exact (checked on an independent
tokenization), ``append_path="full"``, a reason naming the cause and the fix, one warning
per conversation; ``strict_prefix=True`` keeps the refusal; ``drop_thinking=False`` keeps
the prefix.
"""

from __future__ import annotations

import warnings

import pytest

from phaseaware import AssemblyRequest, ChatSettings, Chunk, assemble_append
from phaseaware.assembly.conversation import PrefixRewriteWarning
from phaseaware.chat.errors import PrefixRewriteError

DOCS = [
    Chunk(text="Harbor notes. The code of vault V7 is 5521-D. Amber crates.", score=0.9,
          evidence=("5521-D",)),
    Chunk(text="Valley ledger. The code of vault W3 is 1180-A. Copper cable.", score=0.4),
]  # fmt: skip


def _call(n: int) -> dict:
    return {"id": f"c{n}", "type": "function", "function": {"name": "search", "arguments": "{}"}}


def _sent(opening: str, steps: int) -> list[dict]:
    sent: list[dict] = [{"role": "user", "content": opening}]
    for n in range(steps):
        sent.append({"role": "assistant", "content": "", "reasoning_content": f"think {n}",
                     "tool_calls": [_call(n)]})  # fmt: skip
        if n + 1 < steps:
            sent.append({"role": "tool", "tool_call_id": f"c{n}", "content": f"result {n}"})
    return sent


def _request(deepseek_v4, **settings) -> AssemblyRequest:
    return AssemblyRequest(
        tokenizer=deepseek_v4, chat_format="deepseek-v4", profile="deepseek-v4-flash-base",
        budget_tokens=4000, settings=ChatSettings(thinking=True, **settings),
    )  # fmt: skip


def _step(request: AssemblyRequest, sent: list[dict], n: int, **kwargs):
    new = {"role": "tool", "tool_call_id": f"c{n}", "content": "Results:\n{context}"}
    return assemble_append(
        sent=sent, new=new, chunks=DOCS, question="What is the code of vault V7?",
        request=request, **kwargs,
    )  # fmt: skip


def test_the_drop_rule_falls_back_to_the_full_path_exactly(deepseek_v4):
    request = _request(deepseek_v4)
    with pytest.warns(PrefixRewriteWarning, match="drop_thinking=False"):
        result = _step(request, _sent("Find V7.", 1), 0)
    assert result.append_path == "full"
    assert "drops earlier reasoning" in result.append_reason
    assert "drop_thinking=False" in result.append_reason
    ids = deepseek_v4.encode(result.prompt)
    assert result.token_count == len(ids)
    top = next(p for p in result.placements if p.rank == 0)
    t, c = top.key_token_positions[0], top.key_char_offsets[0]
    assert len(deepseek_v4.decode(ids[:t])) <= c < len(deepseek_v4.decode(ids[: t + 1]))
    assert result.prompt.startswith("5521-D", c)
    # the same conversation, a later step: still exact, no second warning
    with warnings.catch_warnings():
        warnings.simplefilter("error", PrefixRewriteWarning)
        later = _step(request, [*_sent("Find V7.", 2)], 1)
    assert later.append_path == "full" and later.token_count == len(
        deepseek_v4.encode(later.prompt)
    )
    # another conversation warns again
    with pytest.warns(PrefixRewriteWarning):
        _step(request, _sent("Find V8 instead.", 1), 0)


def test_strict_prefix_keeps_the_refusal(deepseek_v4):
    with pytest.raises(PrefixRewriteError, match="drop_thinking=False"):
        _step(_request(deepseek_v4), _sent("Strict one.", 1), 0, strict_prefix=True)


def test_drop_thinking_false_keeps_the_prefix(deepseek_v4):
    request = _request(deepseek_v4, drop_thinking=False)
    with warnings.catch_warnings():
        warnings.simplefilter("error", PrefixRewriteWarning)
        first = _step(request, _sent("Keep it.", 1), 0)
        sent = [*first.messages, {"role": "assistant", "content": "", "tool_calls": [_call(1)]}]
        second = _step(request, sent, 1)
    assert second.prompt.startswith(first.prompt)
    assert second.append_path == "incremental"
