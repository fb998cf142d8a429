"""Append alignment over a 20-turn tool conversation (DeepSeek-V4 tokenizer and format).

After every turn: the bytes already sent are unchanged (the server's prefix
cache hits), the documents sit inside the new tool message only, the count form
(``assemble_append(prefix_tokens=...)``) gives the same absolute positions, and the top
document's evidence lands on a reliable residue of ``deepseek-v4-flash-base``.

"Reliable" is defined from the profile: a residue whose planner reliability is at
least the median residue's (for this profile: residues 1, 2, 5, 6 of 8).
"""

from __future__ import annotations

import random
import statistics

import pytest

from phaseaware import AssemblyOptions, Chunk, assemble_append, get_profile
from phaseaware.chat import PrefixRewriteError, get_chat_format, parse_messages, sent_text
from phaseaware.errors import BudgetError

PROFILE = get_profile("deepseek-v4-flash-base")
_RELIABILITY = [PROFILE.residue_reliability(r) for r in range(PROFILE.period)]
RELIABLE = {r for r, v in enumerate(_RELIABILITY) if v >= statistics.median(_RELIABILITY)}
WORDS = "amber harbor ledger signal timber valley window frost meadow the of and is to".split()
AS_IS = AssemblyOptions(strategy="none", pad=False, repeat=False, length_pad=False)


def _documents(rng: random.Random, turn: int) -> tuple[str, list[Chunk]]:
    question = f"What is the access code of vault V{turn}?"
    chunks = []
    for k in range(4):
        words = " ".join(rng.choice(WORDS) for _ in range(rng.randint(40, 110)))
        code = f"{rng.randint(1000, 9999)}-{rng.choice('ABCDEF')}"
        subject = f"V{turn}" if k == 0 else f"W{rng.randint(100, 999)}"
        chunks.append(
            Chunk(
                text=f"{words.capitalize()}. The access code of vault {subject} is {code}. "
                f"{words[: rng.randint(0, 60)]}",
                score=0.9 - 0.2 * k,
                id=f"t{turn}d{k}",
                evidence=(code,),
            )
        )
    return question, chunks


def _call(turn: int) -> dict:
    call = {
        "id": f"call_{turn}",
        "type": "function",
        "function": {"name": "search", "arguments": f'{{"query": "vault V{turn}"}}'},
    }
    return {"role": "assistant", "content": "", "tool_calls": [call]}


def test_reliable_residues_are_the_profiles_upper_half():
    assert {1, 2, 5, 6} == RELIABLE


def test_twenty_turn_tool_loop(deepseek_v4):
    fmt = get_chat_format("deepseek-v4", deepseek_v4)
    rng = random.Random(7)
    sent: list[dict] = [
        {"role": "system", "content": "You are a research agent. Cite codes."},
        {"role": "user", "content": "Find the access code of every vault."},
    ]
    held_before = ""
    aligned, as_is = [], []
    for turn in range(20):
        question, chunks = _documents(rng, turn)
        sent.append(_call(turn))
        new = {"role": "tool", "tool_call_id": f"call_{turn}", "content": "Results:\n{context}"}
        held = sent_text(sent=parse_messages(sent), chat_format=fmt)
        assert held.startswith(held_before)  # nothing already sent ever changes
        kwargs = dict(
            new=new, chunks=chunks, tokenizer=deepseek_v4, chat_format="deepseek-v4",
            question=question, profile=PROFILE, budget_tokens=40_000,
        )  # fmt: skip
        result = assemble_append(sent=sent, **kwargs)
        assert result.prompt.startswith(held)
        assert all(p.segment_char_start >= len(held) for p in result.placements)
        # positions are absolute: confirmed on an independent tokenization of the prompt
        ids = deepseek_v4.encode(result.prompt)
        assert result.token_count == len(ids)
        top = next(p for p in result.placements if p.rank == 0)
        t, c = top.key_token_positions[0], top.key_char_offsets[0]
        assert len(deepseek_v4.decode(ids[:t])) <= c < len(deepseek_v4.decode(ids[: t + 1]))
        assert result.prompt.startswith(chunks[0].evidence[0], c)
        assert top.residues[0] == t % PROFILE.period
        assert top.residues[0] in RELIABLE, (turn, top.residues)
        # the count form: same absolute positions from the prefix's token count alone
        if turn % 5 == 0:
            cheap = assemble_append(prefix_tokens=len(deepseek_v4.encode(held)), **kwargs)
            assert held + cheap.prompt == result.prompt
            assert cheap.token_count == result.token_count
            assert cheap.placements == tuple(
                p.__class__(**{**p.__dict__, "char_start": p.char_start - len(held),
                               "char_end": p.char_end - len(held),
                               "segment_char_start": p.segment_char_start - len(held),
                               "key_char_offsets": tuple(k - len(held) for k in p.key_char_offsets)})
                for p in result.placements
            )  # fmt: skip
            assert cheap.messages == (result.messages or ())[-1:]
        plain = assemble_append(sent=sent, options=AS_IS, **kwargs)
        assert plain.context == "\n\n".join(ch.text for ch in chunks)
        aligned.append(top.expected_accuracy)
        as_is.append(next(p for p in plain.placements if p.rank == 0).expected_accuracy)
        held_before = held
        sent = list(result.messages or ())
        assert sent[-1]["content"] == "Results:\n" + result.context
    assert statistics.mean(aligned) > statistics.mean(as_is)


def test_append_refuses_what_would_change_sent_bytes(deepseek_v4):
    sent = [{"role": "user", "content": "q"}]
    new = {"role": "user", "content": "{context}"}
    with pytest.raises(PrefixRewriteError, match="after the assistant's reply"):
        assemble_append(
            sent=sent, new=new, chunks=["a text"], tokenizer=deepseek_v4,
            chat_format="deepseek-v4", question="q", budget_tokens=500,
        )  # fmt: skip
    with pytest.raises(PrefixRewriteError, match="drop_thinking=False"):
        assemble_append(  # the drop rule is refused only on request (test_append_drop_rule)
            sent=[*sent, {"role": "assistant", "content": "ok"}], new=new, chunks=["a text"],
            tokenizer=deepseek_v4, chat_format="deepseek-v4", question="q",
            budget_tokens=500, thinking=True, strict_prefix=True,
        )  # fmt: skip


def test_count_form_budget_bounds_the_whole_conversation(deepseek_v4):
    new = {"role": "user", "content": "{context}"}
    with pytest.raises(BudgetError, match="whole conversation"):
        assemble_append(
            prefix_tokens=900, new=new, chunks=["a text"], tokenizer=deepseek_v4,
            chat_format="deepseek-v4", question="q", budget_tokens=900,
        )  # fmt: skip
