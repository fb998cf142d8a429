"""Endpoint discovery and offset-robust placement against a simulated phase-sensitive endpoint.

The endpoint (``tests/support/endpoint_server.py`` on uvicorn, real HTTP on loopback,
the official ``openai`` client) renders DeepSeek-V4 chat messages and puts a hidden
preamble of a length drawn from the seed before them (unknown to every strategy).
It answers each question correctly with the published DeepSeek-V4-Flash-Base
accuracy of the residue (mod 8) of the key token at the server's TRUE position
(the best over the key's occurrences: copies count), drawn from a seeded RNG. The
simulated model has no raw local window, so the planners use the profile with
``local_window=None`` (otherwise they would leave keys in the last 128 tokens unpadded).

Part 1, constant hidden prefix: naive (retrieval order, no padding), phase-aware
assuming offset 0, phase-aware after ``probe_endpoint`` (its record's offset).
Part 2, a prefix that varies per request over 3 lengths (a date line): naive,
phase-aware at the record's smallest offset, and robust placement over the
record's offset set. Accuracy with 95% Wilson intervals, mean prompt tokens per
question (usage.prompt_tokens) and the probe's own tokens.

    python benchmarks/endpoints.py --questions 300 --seed 0
"""

from __future__ import annotations

import argparse
import dataclasses
import random
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import openai  # noqa: E402

from phaseaware.assembly import AssemblyOptions, Chunk, assemble  # noqa: E402
from phaseaware.chat import conversation_layout  # noqa: E402
from phaseaware.endpoints import probe_endpoint  # noqa: E402
from phaseaware.intervals import wilson_interval  # noqa: E402
from phaseaware.profiles.registry import get_profile  # noqa: E402
from phaseaware.tokenizers import load_tokenizer  # noqa: E402
from tests.support.endpoint_server import Served, start_endpoint  # noqa: E402

WORDS = (
    "the grid operator module cell voltage inverter firmware warranty report site team "
    "battery schedule storage charge discharge panel cable meter audit review service"
).split()
NEEDLE = "access code"


def make_question(rng: random.Random, n_chunks: int = 6) -> tuple[list[Chunk], str, str]:
    """(chunks, question, code): one chunk holds the code, cut mid-sentence like a splitter."""
    code = f"{rng.randrange(10**5, 10**6)}"
    site = rng.choice(["Aster", "Birch", "Cedar", "Dune", "Elm", "Fjord", "Glen", "Heath"])
    chunks = []
    target = rng.randrange(n_chunks)
    for i in range(n_chunks):
        words = [rng.choice(WORDS) for _ in range(rng.randint(40, 90))]
        if i == target:
            at = rng.randint(5, len(words) - 5)
            words[at:at] = f"The {NEEDLE} for site {site} is {code}.".split()
        text = " ".join(words)
        score = 0.9 if i == target else rng.uniform(0.3, 0.85)
        evidence = (f"{NEEDLE} for site {site} is {code}",) if i == target else ()
        chunks.append(Chunk(text=text, score=score, id=f"c{i}", evidence=evidence))
    return chunks, f"What is the {NEEDLE} for site {site}?", code


def simulated_answer(accuracy: list[float], seed: int) -> Callable[[Served, dict[str, Any]], str]:
    rng = random.Random(seed)

    def answer(served: Served, body: dict[str, Any]) -> str:
        text, tokens = served.text, served.tokens
        if text is None or tokens is None or "What is the" not in text:
            return "ok"  # probe requests
        site = text.rsplit("for site ", 1)[1].split("?", 1)[0]
        key = f"{NEEDLE} for site {site} is "
        best, at = 0.0, text.find(key)
        while at >= 0:
            residue = (tokens.token_at_char(at) + served.extra) % len(accuracy)
            best = max(best, accuracy[residue])
            at = text.find(key, at + 1)
        code = text.split(key, 1)[1][:6] if key in text else ""
        return code if rng.random() < best else "unknown"

    return answer


def run_strategy(
    name: str, base_url: str, questions: list[Any], options: AssemblyOptions, tok: Any, prof: Any
) -> tuple[str, int, int, float, float]:
    client = openai.OpenAI(base_url=base_url, api_key="EMPTY", max_retries=0)
    layout = conversation_layout(tokenizer=tok, chat_format="deepseek-v4")
    hits = tokens = 0
    for chunks, question, code in questions:
        result = assemble(
            chunks, tokenizer=tok, chat_format=layout, question=question, profile=prof,
            budget_tokens=4000, options=options,
        )  # fmt: skip
        response = client.chat.completions.create(
            model="sim-model",
            messages=list(result.messages or ()),
            max_tokens=8,  # type: ignore[arg-type]
        )
        hits += (response.choices[0].message.content or "").strip() == code
        tokens += response.usage.prompt_tokens if response.usage else 0
    n = len(questions)
    low, high = wilson_interval(hits, n)
    return name, hits, n, tokens / n, (low, high)  # type: ignore[return-value]


def table(title: str, rows: list[Any], probe_tokens: int | None) -> None:
    print(title)
    print(f"{'strategy':<34} {'accuracy':>8} {'95% CI':>14} {'tokens/q':>9}")
    for name, hits, n, tokens, (low, high) in rows:
        ci = f"{100 * low:.1f}-{100 * high:.1f}%"
        print(f"{name:<34} {100 * hits / n:>7.1f}% {ci:>14} {tokens:>9.1f}")
    if probe_tokens is not None:
        print(f"(discovery: {probe_tokens} prompt tokens once per endpoint)")
    print()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--questions", type=int, default=300)
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args()
    rng = random.Random(args.seed)
    tok = load_tokenizer("deepseek-v4")
    # The simulated model has no raw local window (the residue effect holds at every
    # distance from the end), so the strategies plan with the profile without a window.
    prof = dataclasses.replace(get_profile("deepseek-v4-flash-base"), local_window=None)
    accuracy = list(prof.residue_accuracy)
    questions = [make_question(rng) for _ in range(args.questions)]
    hidden_n = rng.randint(3, 40)  # the endpoint's secret; strategies never read it

    def fixed(_i: int) -> str:
        return "System preamble:" + " ." * hidden_n

    date_rng = random.Random(args.seed + 1)

    def varying(_i: int) -> str:
        return "Date line:" + " ." * date_rng.choice((1, 2, 3))

    naive = AssemblyOptions(strategy="none", pad=False, repeat=False, length_pad=False)
    for title, hidden, part in (
        ("Constant hidden prefix", fixed, 1),
        ("Hidden prefix varying per request over 3 lengths", varying, 2),
    ):
        server, app = start_endpoint(
            tokenizer=tok, chat_format="deepseek-v4", hidden_prefix=hidden,
            answer=simulated_answer(accuracy, args.seed + 10 * part),
        )  # fmt: skip
        with server:
            record = probe_endpoint(
                base_url=server.base_url, model="sim-model", tokenizer=tok,
                chat_format="deepseek-v4", save=False, rounds=4,
            )  # fmt: skip
            probe_tokens = sum(len(s.ids) for s in app.log)
            runs = [("naive", naive), ("phase-aware, offset 0 assumed", AssemblyOptions())]
            if part == 1:
                runs.append((f"phase-aware after discovery (d={record.offset})",
                             AssemblyOptions(position_offset=record.offset)))  # fmt: skip
            else:
                runs.append((f"phase-aware, discovered d={record.offset} only",
                             AssemblyOptions(position_offset=record.offset)))  # fmt: skip
                runs.append((f"robust over offsets {list(record.offsets)}",
                             AssemblyOptions(offsets=record.offsets)))  # fmt: skip
            rows = [run_strategy(n, server.base_url, questions, o, tok, prof) for n, o in runs]
        table(f"{title} (record: {record.mode}, {record.stability}, offsets "
              f"{list(record.offsets)}; {args.questions} questions, seed {args.seed})",
              rows, probe_tokens)  # fmt: skip


if __name__ == "__main__":
    main()
