"""Benchmark: what a prefix-caching API reuses per agent step, append alignment vs re-assembly.

Run: ``python benchmarks/prefix_cache.py [--turns 8] [--seed 0] [--unit 64] [--hit-price 0.0333]``.

The tool conversation of ``benchmarks/append_alignment.py`` (DeepSeek-V4 tokenizer and
chat format, profile ``deepseek-v4-flash-base``, 5 documents per tool call), grown two ways:

- append: ``assemble_append`` places each call's documents inside its new tool message;
  everything sent stays byte-identical;
- re-assemble: every step re-assembles the whole conversation with ALL documents found
  so far in one context slot at the top (the first user message), ordered and padded
  anew by relevance, as a RAG loop that rebuilds its prompt each step does.

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


def run(turns: int, seed: int, *, unit: int, hit: float) -> list[dict[str, Any]]:
    tokenizer = load_tokenizer("deepseek-v4")
    profile = get_profile(PROFILE)
    rng = random.Random(seed)
    appended = start()
    history = start()
    history[1] = {
        "role": "user",
        "content": "Documents found so far:\n{context}\n\n" + history[1]["content"],
    }
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
        history.append(tool_call(turn, question))
        history.append(
            {"role": "tool", "tool_call_id": f"call_{turn}", "content": "(documents added above)"}
        )
        b = assemble_conversation(
            history, found, tokenizer=tokenizer, chat_format="deepseek-v4", question=question,
            profile=profile, budget_tokens=BUDGET,
        )  # fmt: skip
        row: dict[str, Any] = {"turn": turn + 1}
        for label, result in (("append", a), ("reassemble", b)):
            before = last.get(label)
            kept = (
                0 if before is None else unchanged_prefix_tokens(tokenizer, result.prompt, before)
            )
            row[label] = (result.token_count, kept)
            row[f"{label}_price"] = price(result.token_count, kept, unit=unit, hit=hit)
            last[label] = result.prompt
        row["append_sent"] = a.unchanged_sent_tokens
        row["reassemble_no_context"] = b.unchanged_prefix_tokens
        rows.append(row)
    return rows


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
    print(
        f"{'step':>4} | {'append: tokens':>14} {'unchanged':>9} {'share':>6} {'price':>6} | "
        f"{'re-assemble: tokens':>19} {'unchanged':>9} {'share':>6} {'price':>6}"
    )
    totals = {"append": [0, 0.0], "reassemble": [0, 0.0]}
    for r in rows:
        cells = []
        for label, width in (("append", 14), ("reassemble", 19)):
            tokens, kept = r[label]
            totals[label][0] += tokens
            totals[label][1] += tokens * r[f"{label}_price"]
            cells.append(
                f"{tokens:>{width}} {kept:>9} {kept / tokens:>6.1%} {r[f'{label}_price']:>6.3f}"
            )
        print(f"{r['turn']:>4} | {cells[0]} | {cells[1]}")
    for label in ("append", "reassemble"):
        tokens, billed = totals[label]
        print(
            f"{label}: {tokens} prompt tokens sent, billed as {billed:.0f} uncached "
            f"({billed / tokens:.1%})"
        )
    print(
        "append: unchanged_sent_tokens (vs the sent conversation) per step: "
        + " ".join(str(r["append_sent"]) for r in rows)
    )
    print(
        "re-assemble: unchanged_prefix_tokens (vs no context) per step: "
        + " ".join(str(r["reassemble_no_context"]) for r in rows)
    )


if __name__ == "__main__":
    main()
