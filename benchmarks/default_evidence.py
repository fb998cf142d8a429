"""Benchmark: default evidence (no evidence strings) finds what the question asks for.

Run: ``python benchmarks/default_evidence.py [--sets 50] [--questions 400] [--skip-demo]``.
Prints three tables:

1. **Name sets** (seeded, generated here): the question's common words
   ("access", "code", "policy") recur in every chunk, only a name is
   distinctive. For every chunk that contains the name: is its primary key
   (``key_token_positions[0]``, measured by re-tokenizing the assembled prompt)
   the first token of the name? Default evidence today vs text order (the
   first match of any question term, as before). Target: >= 95%.
2. **Reference demo** (``phaseaware.demo.run.run_demo``, the shipped model on
   CPU): RAG accuracy per strategy with the chunks' evidence strings and
   without them (one calibration, reused). Target: phase-aware without
   evidence strings within 3 points of phase-aware with them.
3. **Evidence search time** on chunk sets dense in question terms (every chunk
   mentions them >= 10 times), o200k: the set-wide search vs the former
   per-chunk text-order search, and one o200k encode of the same text for scale.
"""

from __future__ import annotations

import argparse
import re
import sys
import tempfile
import time
from collections.abc import Sequence
from pathlib import Path

import numpy as np

from phaseaware.assembly import AssemblyOptions, Chunk, assemble
from phaseaware.assembly.evidence.keys import chunk_key_chars, question_terms
from phaseaware.chat import get_chat_format
from phaseaware.profiles.registry import get_profile
from phaseaware.tokenizers import load_tokenizer

NAMES = (
    "Okonkwo Haldane Varga Lindqvist Moreau Tanaka Oyelaran Castellanos Novak Brennan "
    "Achterberg Fitzgerald Kowalczyk Delacroix Ivanova Nakamura Rasmussen Quintero"
).split()
COMMON = (
    "The access code policy was revised after the audit.",
    "Every access request needs a code issued under the policy.",
    "Staff must never share an access code, says the policy.",
    "The policy lists which access code opens each door.",
    "A new access code is issued whenever the policy changes.",
)
FILLER = (
    "The building closes at nine on weekdays.",
    "Visitors sign in at the front desk.",
    "Maintenance checks the lifts every month.",
    "The cafeteria serves lunch from noon.",
)


def name_set(rng: np.random.Generator, *, n: int) -> tuple[str, str, list[Chunk]]:
    """(question, name, chunks): ``n`` chunks; the name is in 1..3 of them."""
    names = list(rng.choice(NAMES, size=n + 1, replace=n + 1 > len(NAMES)))
    name = str(names[0])
    holders = set(rng.choice(n, size=int(rng.integers(1, 4)), replace=False).tolist())
    chunks = []
    for i in range(n):
        sentences = [str(rng.choice(COMMON)) for _ in range(int(rng.integers(3, 7)))]
        sentences += [str(rng.choice(FILLER)) for _ in range(int(rng.integers(1, 4)))]
        rng.shuffle(sentences)
        who = name if i in holders else str(names[i + 1])
        if who == name and i not in holders:
            who = "Ellison"
        fact = f"Under the policy, {who} holds access code {int(rng.integers(1000, 9999))}."
        sentences.insert(int(rng.integers(1, len(sentences) + 1)), fact)
        chunks.append(
            Chunk(text=" ".join(sentences), score=float(rng.uniform(0.4, 0.9)), id=f"c{i}")
        )
    return f"What is the access code policy for {name}?", name, chunks


def text_order_keys(text: str, terms: Sequence[str], max_keys: int) -> tuple[int, ...]:
    """The former default: the first ``max_keys`` matches of any term, in text order."""
    pattern = re.compile(
        r"(?<!\w)(?:" + "|".join(re.escape(t) for t in sorted(set(terms))) + r")(?!\w)",
        re.IGNORECASE | re.UNICODE,
    )
    return tuple(sorted({m.start() for m in pattern.finditer(text)})[:max_keys])


def name_rows(sets: int) -> list[str]:
    rows = [
        f"{'tokenizer':<22} {'sets':>5} {'chunks w/ name':>14} {'default':>8} "
        f"{'text order':>10} {'name keys':>9}"
    ]
    profile = get_profile("deepseek-v4-flash-base")
    options = AssemblyOptions(allow_tokenizer_mismatch=True)
    for spec in ("tiktoken:o200k_base", "tiktoken:cl100k_base", "deepseek-v4"):
        tok = load_tokenizer(spec)
        fmt = get_chat_format("none", tok)
        rng = np.random.default_rng(7)
        holding = hits = legacy = name_keys = all_keys = 0
        for _ in range(sets):
            question, name, chunks = name_set(rng, n=20)
            result = assemble(
                chunks, tokenizer=tok, chat_format=fmt, question=question, profile=profile,
                budget_tokens=20_000, options=options,
            )  # fmt: skip
            measured = tok.tokenize(result.prompt)
            terms = question_terms(question)
            for p in result.placements:
                text = result.prompt[p.char_start : p.char_end]
                starts = [m.start() for m in re.finditer(rf"\b{name}\b", text)]
                if not starts:
                    continue
                holding += 1
                name_tokens = {measured.token_at_char(p.char_start + s) for s in starts}
                hits += p.key_token_positions[0] in name_tokens
                old = text_order_keys(text, terms, options.max_keys_per_chunk)
                legacy += measured.token_at_char(p.char_start + old[0]) in name_tokens
                name_keys += sum(t in name_tokens for t in p.key_token_positions)
                all_keys += len(p.key_token_positions)
        rows.append(
            f"{spec:<22} {sets:>5} {holding:>14} {100 * hits / holding:>7.1f}% "
            f"{100 * legacy / holding:>9.1f}% {100 * name_keys / all_keys:>8.1f}%"
        )
    return rows


def demo_rows(questions: int, base_prompts: int) -> list[str]:
    import torch

    from phaseaware.demo.run import DemoSettings, run_demo

    torch.set_num_threads(1)
    rows = [f"{'strategy':<20} {'with evidence':>14} {'without':>9} {'diff':>7}"]
    with tempfile.TemporaryDirectory() as out:
        base = DemoSettings(questions=questions, base_prompts=base_prompts, out=Path(out))
        results = {}
        for flag in (True, False):  # the second run reuses the first one's calibration log
            settings = DemoSettings(
                questions=base.questions, base_prompts=base.base_prompts, out=base.out,
                fresh=flag, evidence_strings=flag,
            )  # fmt: skip
            demo = run_demo(settings, on_stage=lambda message: print(message, file=sys.stderr))
            results[flag] = {r.arrangement: r.accuracy for r in demo.strategies}
    for strategy, with_acc in results[True].items():
        without = results[False][strategy]
        rows.append(
            f"{strategy:<20} {100 * with_acc:>13.1f}% {100 * without:>8.1f}% "
            f"{100 * (without - with_acc):>+6.1f}"
        )
    diff = results[False]["phase-aware"] - results[True]["phase-aware"]
    rows.append(f"[{'x' if diff >= -0.03 else ' '}] phase-aware without evidence strings "
                f"within 3 points of with them ({100 * diff:+.1f})")  # fmt: skip
    return rows


DENSE_QUESTION = "Which vault code opens the Tamarind archive?"
_DENSE_WORDS = (
    "battery cable delta engine forest garden harbor island journal kernel ledger market "
    "needle orbit parcel quarry river signal timber umbrella valley window the of and to in is"
).split()
_DENSE_TERMS = ("vault", "code", "opens", "Tamarind", "archive")


def dense_chunks(n: int, tokens: int, seed: int) -> list[Chunk]:
    """``n`` chunks of about ``tokens`` o200k tokens; each mentions the terms >= 10 times."""
    rng = np.random.default_rng(seed)
    chunks = []
    for i in range(n):
        words = rng.choice(_DENSE_WORDS, size=int(tokens * 0.8)).tolist()
        for j in range(0, len(words), 8):  # a question term every 8 words
            words[j] = str(_DENSE_TERMS[int(rng.integers(len(_DENSE_TERMS)))])
        text = " ".join(
            " ".join(words[j : j + 12]).capitalize() + "." for j in range(0, len(words), 12)
        )
        chunks.append(Chunk(text=text, score=float(rng.random()), id=f"d{i}"))
    return chunks


def best_of(fn, repeats: int) -> float:
    best = float("inf")
    for _ in range(repeats):
        start = time.perf_counter()
        fn()
        best = min(best, time.perf_counter() - start)
    return best


def search_rows(repeats: int) -> list[str]:
    tok = load_tokenizer("tiktoken:o200k_base")
    terms = question_terms(DENSE_QUESTION)
    rows = [
        f"{'case (o200k)':<16} {'mentions/chunk':>14} {'text order ms':>13} {'set-wide ms':>11} "
        f"{'encode ms':>9} {'set-wide/encode':>15}"
    ]
    for n, size in ((20, 300), (400, 300)):
        chunks = dense_chunks(n, size, seed=n)
        texts = [c.text for c in chunks]
        pattern = re.compile(r"(?<!\w)(?:" + "|".join(terms) + r")(?!\w)", re.IGNORECASE)
        mentions = min(len(pattern.findall(t)) for t in texts)
        joined = "\n\n".join(texts)
        t_old = best_of(lambda x=texts: [text_order_keys(t, terms, 8) for t in x], repeats)
        t_new = best_of(lambda c=chunks: chunk_key_chars(c, terms=terms, max_keys=8), repeats)
        t_enc = best_of(lambda j=joined: tok.encode(j), repeats)
        rows.append(
            f"{f'{n} x {size} tok':<16} {mentions:>14} {1e3 * t_old:>13.2f} {1e3 * t_new:>11.2f} "
            f"{1e3 * t_enc:>9.2f} {t_new / t_enc:>15.3f}"
        )
    return rows


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sets", type=int, default=50, help="generated name sets per tokenizer")
    parser.add_argument("--questions", type=int, default=400, help="demo RAG questions")
    parser.add_argument("--base-prompts", type=int, default=40, help="demo calibration prompts")
    parser.add_argument("--repeats", type=int, default=5, help="timing repeats (best of)")
    parser.add_argument("--skip-demo", action="store_true", help="skip the reference demo")
    args = parser.parse_args()
    print("1. Name sets (20 chunks each): primary key is the name's first token\n")
    print("\n".join(name_rows(args.sets)))
    print("\n3. Evidence search on chunk sets dense in question terms\n")
    print("\n".join(search_rows(args.repeats)))
    if not args.skip_demo:
        print("\n2. Reference demo, RAG accuracy with and without evidence strings\n")
        print("\n".join(demo_rows(args.questions, args.base_prompts)))


if __name__ == "__main__":
    main()
