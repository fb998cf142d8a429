"""Benchmark: what a prefix-caching API reuses per agent step, append alignment vs re-assembly.

Run: ``python benchmarks/prefix_cache.py [--turns 8] [--seed 0] [--unit 64] [--hit-price 0.0333]``.

The tool conversation of ``benchmarks/append_alignment.py`` (DeepSeek-V4 tokenizer and
chat format, profile ``deepseek-v4-flash-base``, 5 documents per tool call), grown two ways:

- append: ``assemble_append`` places each call's documents inside its new tool message;
  everything sent stays byte-identical;
- re-assemble, context at the end: every step re-assembles the conversation with ALL
  documents found so far, ordered and padded anew, in one context slot in the newest
  tool message (earlier tool messages hold a placeholder), as a RAG loop that rebuilds
  its prompt each step does;
- re-assemble, context at the top: the same, with the slot in the first user message.

Per step: the prompt's tokens, the leading token ids it shares with the previous
step's prompt (``unchanged_prefix_tokens``, exact, from the tokenizer's ids), the share,
and the price of the step's prompt relative to an uncached one on a cache that hits
only whole units of ``--unit`` tokens at ``--hit-price`` of a miss (DeepSeek's hosted
cache: about 1/30). The first step has nothing cached in either.
"""

from __future__ import annotations

import argparse
import random
from typing import Any

from append_alignment import PROFILE, start, tool_call, tool_result, turn_documents

from phaseaware import Chunk, assemble_append
from phaseaware.assembly.conversation import assemble_conversation
from phaseaware.assembly.report.prefix import unchanged_prefix_tokens
from phaseaware.profiles.registry import get_profile
from phaseaware.tokenizers import load_tokenizer

BUDGET = 64_000


def price(tokens: int, unchanged: int, *, unit: int, hit: float) -> float:
    """The prompt's price relative to all-miss: whole cached units at ``hit``."""
    cached = unit * (min(unchanged, tokens - 1) // unit)
    return (cached * hit + (tokens - cached)) / tokens


def _history(turns: list[str], *, top: bool) -> list[dict[str, Any]]:
    """The re-assembled conversation after ``len(turns)`` tool calls, one ``{context}`` slot."""
    messages = start()
    slot = "Documents found so far:\n{context}"
    if top:
        messages[1] = {"role": "user", "content": slot + "\n\n" + messages[1]["content"]}
    for turn, question in enumerate(turns):
        last = turn == len(turns) - 1
        content = slot if last and not top else "(documents: see the context)"
        messages.append(tool_call(turn, question))
        messages.append({"role": "tool", "tool_call_id": f"call_{turn}", "content": content})
    return messages


def run(turns: int, seed: int, *, unit: int, hit: float) -> list[dict[str, Any]]:
    tokenizer = load_tokenizer("deepseek-v4")
    profile = get_profile(PROFILE)
    rng = random.Random(seed)
    appended = start()
    questions: list[str] = []
    found: list[Chunk] = []
    rows: list[dict[str, Any]] = []
    last: dict[str, str] = {}
    for turn in range(turns):
        question, chunks = turn_documents(rng, turn)
        appended.append(tool_call(turn, question))
        a = assemble_append(
            sent=appended, new=tool_result(turn), chunks=chunks, tokenizer=tokenizer,
            chat_format="deepseek-v4", question=question, profile=profile, budget_tokens=BUDGET,
        )  # fmt: skip
        appended = list(a.messages or ())
        found += chunks
        questions.append(question)
        results = {"append": a}
        for label, top in (("end", False), ("top", True)):
            results[label] = assemble_conversation(
                _history(questions, top=top), found, tokenizer=tokenizer,
                chat_format="deepseek-v4", question=question, profile=profile,
                budget_tokens=BUDGET,
            )  # fmt: skip
        row: dict[str, Any] = {"turn": turn + 1}
        for label, result in results.items():
            before = last.get(label)
            kept = (
                0 if before is None else unchanged_prefix_tokens(tokenizer, result.prompt, before)
            )
            row[label] = (result.token_count, kept)
            row[f"{label}_price"] = price(result.token_count, kept, unit=unit, hit=hit)
            row[f"{label}_no_context"] = result.unchanged_prefix_tokens
            last[label] = result.prompt
        row["append_sent"] = a.unchanged_sent_tokens
        rows.append(row)
    return rows


LABELS = {
    "append": "append alignment",
    "end": "re-assembled, context at the end",
    "top": "re-assembled, context at the top",
}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--turns", type=int, default=8)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--unit", type=int, default=64, help="tokens per cached unit")
    parser.add_argument("--hit-price", type=float, default=1 / 30, help="hit price / miss price")
    args = parser.parse_args()
    rows = run(args.turns, args.seed, unit=args.unit, hit=args.hit_price)
    print(
        f"prefix reuse per agent step ({args.turns} tool calls, seed {args.seed}, deepseek-v4, "
        f"profile {PROFILE}); price: cache unit {args.unit} tokens, hit {args.hit_price:.4f} x miss"
    )
    print("unchanged: leading token ids shared with the previous step's prompt")
    head = " | ".join(
        f"{label:>6} {'tokens':>6} {'unch.':>6} {'share':>6} {'price':>5}" for label in LABELS
    )
    print(f"{'step':>4} | {head}")
    totals = {label: [0, 0.0] for label in LABELS}
    for r in rows:
        cells = []
        for label in LABELS:
            tokens, kept = r[label]
            totals[label][0] += tokens
            totals[label][1] += tokens * r[f"{label}_price"]
            cells.append(
                f"{'':>6} {tokens:>6} {kept:>6} {kept / tokens:>6.1%} {r[f'{label}_price']:>5.3f}"
            )
        print(f"{r['turn']:>4} | " + " | ".join(cells))
    for label, name in LABELS.items():
        tokens, billed = totals[label]
        print(
            f"{name}: {tokens} prompt tokens sent, billed as {billed:.0f} uncached "
            f"({billed / tokens:.1%}); unchanged_prefix_tokens (vs no context) per step: "
            + " ".join(str(r[f"{label}_no_context"]) for r in rows)
        )
    print(
        "append alignment: unchanged_sent_tokens (vs the sent conversation) per step: "
        + " ".join(str(r["append_sent"]) for r in rows)
    )


if __name__ == "__main__":
    main()
