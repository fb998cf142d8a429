"""Benchmark: append alignment in a 20-turn agent loop vs appending tool results as is.

Run: ``python benchmarks/append_alignment.py [--turns 20] [--seed 0]``.

A deterministic (seeded) tool conversation with the DeepSeek-V4 tokenizer, the
``deepseek-v4`` chat format and the ``deepseek-v4-flash-base`` profile: a system
prompt, a user task, then per turn one assistant tool call and one tool result
holding 5 retrieved documents (60-150 words each; one states the answer).
Two conversations grow side by side from the same turns:

- aligned: ``assemble_append`` places the documents inside the new tool message
  (order + padding), everything already sent byte-identical (checked);
- as is: the same documents joined in retrieval order, appended unchanged.

Per turn: the top document's evidence accuracy and the relevance-weighted
accuracy of all documents' evidence, as the message will be read on every later
call (out of the raw local window: residue reliability), and padding tokens.
Last, the final prompt of each conversation is audited with the full profile
(local window included): the mean accuracy of every turn's top evidence at the
final call.
"""

from __future__ import annotations

import argparse
import random
import statistics
import time
from typing import Any

from phaseaware import AssemblyOptions, Chunk, assemble_append, audit_prompt
from phaseaware.profiles.registry import get_profile
from phaseaware.tokenizers import load_tokenizer

PROFILE = "deepseek-v4-flash-base"
WORDS = (
    "archive battery cable delta engine forest garden harbor island journal kernel ledger "
    "market needle orbit parcel quarry river signal timber umbrella valley window yard zenith "
    "amber bronze copper dune ember frost glacier hollow ivory jasper lantern meadow north "
    "the of and to in is was for on with as by at from that this which were are be"
).split()
NAMES = "Kestrel Tamarind Osprey Juniper Halcyon Marlow Quillon Sorrel Tansy Wren".split()
AS_IS = AssemblyOptions(strategy="none", pad=False, repeat=False, length_pad=False)


def _sentences(rng: random.Random, words: int) -> list[str]:
    picked = [rng.choice(WORDS) for _ in range(words)]
    return [" ".join(picked[j : j + 12]).capitalize() + "." for j in range(0, words, 12)]


def turn_documents(rng: random.Random, turn: int) -> tuple[str, list[Chunk]]:
    """(question, 5 documents in retrieval order, the answer first) of one tool call."""
    vault = f"{NAMES[turn % len(NAMES)]}-{turn}"
    question = f"What is the access code of vault {vault}?"
    chunks = []
    for k in range(5):
        sentences = _sentences(rng, rng.randint(60, 150))
        code = f"{rng.randint(1000, 9999)}-{rng.choice('ABCDEFGH')}"
        subject = vault if k == 0 else f"{rng.choice(NAMES)}-{rng.randint(30, 99)}"
        fact = f"The access code of vault {subject} is {code}."
        sentences.insert(rng.randint(0, len(sentences)), fact)
        chunks.append(
            Chunk(
                text=" ".join(sentences),
                score=round(0.95 - 0.1 * k - 0.05 * rng.random(), 4),
                id=f"t{turn}-d{k}",
                evidence=(code,),
            )
        )
    return question, chunks


def start() -> list[dict[str, Any]]:
    return [
        {"role": "system", "content": "You are a research agent. Use the search tool; cite codes."},
        {"role": "user", "content": "Collect the access code of every vault on the list."},
    ]


def tool_call(turn: int, question: str) -> dict[str, Any]:
    call = {
        "id": f"call_{turn}",
        "type": "function",
        "function": {"name": "search", "arguments": f'{{"query": "{question}"}}'},
    }
    return {"role": "assistant", "content": f"Searching ({turn + 1}).", "tool_calls": [call]}


def tool_result(turn: int) -> dict[str, Any]:
    return {"role": "tool", "tool_call_id": f"call_{turn}", "content": "Results:\n{context}"}


def run(turns: int, seed: int) -> dict[str, Any]:
    tokenizer = load_tokenizer("deepseek-v4")
    profile = get_profile(PROFILE)
    rng = random.Random(seed)
    aligned, as_is = start(), start()
    rows, tops = [], []
    elapsed = 0.0
    for turn in range(turns):
        question, chunks = turn_documents(rng, turn)
        aligned.append(tool_call(turn, question))
        as_is.append(tool_call(turn, question))
        kwargs: dict[str, Any] = dict(
            new=tool_result(turn), chunks=chunks, tokenizer=tokenizer, chat_format="deepseek-v4",
            question=question, profile=profile, budget_tokens=64_000,
        )  # fmt: skip
        t0 = time.perf_counter()
        a = assemble_append(sent=aligned, **kwargs)
        elapsed += time.perf_counter() - t0
        b = assemble_append(sent=as_is, options=AS_IS, **kwargs)
        assert b.context == "\n\n".join(c.text for c in chunks)  # appended as is
        assert b.padding_tokens == 0
        top_a = next(p for p in a.placements if p.rank == 0)
        top_b = next(p for p in b.placements if p.rank == 0)
        rows.append(
            {
                "turn": turn + 1,
                "prefix_tokens": len(tokenizer.encode(a.prompt[: a.placements[0].char_start])),
                "top_aligned": top_a.expected_accuracy,
                "top_as_is": top_b.expected_accuracy,
                "all_aligned": a.expected_accuracy,
                "all_as_is": b.expected_accuracy,
                "residue_aligned": top_a.residues[0],
                "residue_as_is": top_b.residues[0],
                "padding": a.padding_tokens,
            }
        )
        tops.append(chunks[0].evidence[0])
        aligned, as_is = list(a.messages or ()), list(b.messages or ())
        final_a, final_b = a.prompt, b.prompt
    finals = {}
    for label, prompt in (("aligned", final_a), ("as_is", final_b)):
        audit = audit_prompt(prompt, tokenizer=tokenizer, profile=profile, evidence=tops)
        finals[label] = statistics.mean(e.best_expected_accuracy or 0.0 for e in audit.evidence)
    return {"rows": rows, "finals": finals, "seconds_per_turn": elapsed / turns}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--turns", type=int, default=20)
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args()
    out = run(args.turns, args.seed)
    rows = out["rows"]
    print(
        f"append alignment, {args.turns}-turn tool conversation (seed {args.seed}), "
        f"deepseek-v4 tokenizer + chat format, profile {PROFILE}"
    )
    print(f"{'turn':>4} {'prefix':>7} | {'top evidence':^21} | {'all evidence':^17} | {'pad':>4}")
    print(
        f"{'':>4} {'tokens':>7} | {'aligned':>7} {'as is':>6} {'res':>6} | "
        f"{'aligned':>7} {'as is':>7} | {'tok':>4}"
    )
    for r in rows:
        print(
            f"{r['turn']:>4} {r['prefix_tokens']:>7} | {r['top_aligned']:>7.3f} "
            f"{r['top_as_is']:>6.3f} {r['residue_aligned']:>2}/{r['residue_as_is']:<3} | "
            f"{r['all_aligned']:>7.3f} {r['all_as_is']:>7.3f} | {r['padding']:>4}"
        )

    def mean(key: str) -> float:
        return statistics.mean(r[key] for r in rows)

    print(
        f"{'mean':>4} {'':>7} | {mean('top_aligned'):>7.3f} {mean('top_as_is'):>6.3f} "
        f"{'':>6} | {mean('all_aligned'):>7.3f} {mean('all_as_is'):>7.3f} | "
        f"{mean('padding'):>4.1f}"
    )
    print(
        f"final call ({rows[-1]['prefix_tokens']}+ tokens, local window included): mean top-"
        f"evidence accuracy aligned {out['finals']['aligned']:.3f} vs as is "
        f"{out['finals']['as_is']:.3f}"
    )
    print(f"assemble_append: {1000 * out['seconds_per_turn']:.0f} ms per turn (mean)")


if __name__ == "__main__":
    main()
