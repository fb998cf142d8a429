"""Simulated models for ``phaseaware compare`` tests, and the questions they answer.

Each reads the prompt as a model would: it finds the asked name's fact (``The code
for <name> is <code>.``) and answers the code, or ``unknown``:

* :func:`answer` (``--backend callable``) and :func:`residue_model` (for
  :func:`tests.support.endpoint_server.start_endpoint`, over HTTP): right unless the
  name's first token sits at the weak residue 3 (mod 4) of the prompt as tokenized
  with cl100k (the callable tokenizes the prompt; the endpoint has the server's own
  tokenization): a pure residue effect;
* :func:`top_last_model` (endpoint): right with probability 0.95 when the asked
  fact is the last fact in the prompt, 0.55 otherwise, drawn from a hash of the
  prompt text (seeded by the prompt: the same prompt, the same answer): a pure
  order effect, no residue effect.

:func:`write_questions` writes the seeded questions file they answer.
"""

from __future__ import annotations

import functools
import hashlib
import json
import re
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np

from phaseaware.tokenizers import load_tokenizer

PERIOD = 4
WEAK = 3
NAMES = ["Ada", "Bram", "Cleo", "Dov", "Elif", "Fenna", "Gus", "Hana", "Ivo", "Juno"]
WORDS = "river stone lamp garden tower market bridge window valley harbor".split()
_FACT = r"The code for ({name}) is (\w+)\."


def write_questions(path: Path, count: int = 48, seed: int = 0) -> Path:
    """``count`` questions, each with three chunks (the asked name's fact in the most
    relevant one, ``evidence`` its name), chunk order shuffled, as a JSONL file."""
    rng = np.random.default_rng(seed)
    lines = []
    for i in range(count):
        names = rng.choice(NAMES, size=3, replace=False)
        chunks = []
        for slot, name in enumerate(names):
            filler = " ".join(rng.choice(WORDS, size=int(rng.integers(3, 15))))
            code = f"{rng.integers(100, 999)}"
            text = f"{filler}. The code for {name} is {code}. {filler}."
            if slot == 0:
                answer = code
            chunks.append(
                {
                    "text": text,
                    "score": [0.9, 0.7, 0.5][slot],
                    "id": f"c{slot}",
                    "evidence": [f"{name} is {code}"[: len(name)]] if slot == 0 else [],
                }
            )
        rng.shuffle(chunks)
        lines.append(
            {"id": f"q{i}", "question": f"What is the code for {names[0]}?", "chunks": chunks,
             "answer": answer}
        )  # fmt: skip
    path.write_text("".join(json.dumps(line) + "\n" for line in lines), encoding="utf-8")
    return path


def _asked_fact(prompt: str) -> re.Match[str] | None:
    name = re.findall(r"What is the code for (\w+)\?", prompt)[-1]
    return re.search(_FACT.format(name=name), prompt)


def _chance(prompt: str) -> float:
    """A uniform draw in [0, 1) fixed by the prompt text."""
    return int.from_bytes(hashlib.sha256(prompt.encode("utf-8")).digest()[:8], "big") / 2**64


def residue_model(served: Any, body: dict[str, Any]) -> str:
    """Endpoint answer: right unless the asked name's first token (as the server
    tokenized the prompt) sits at residue ``WEAK`` mod ``PERIOD``."""
    fact = _asked_fact(served.text)
    if fact is None:
        return "unknown"
    key = served.tokens.token_at_char(fact.start(1))
    return f"{fact.group(2)}." if key % PERIOD != WEAK else "unknown"


def top_last_model(served: Any, body: dict[str, Any]) -> str:
    """Endpoint answer: right with probability 0.95 when the asked fact comes after
    every other fact in the prompt, else 0.55; where its tokens sit does not matter."""
    text = served.text
    fact = _asked_fact(text)
    if fact is None:
        return "unknown"
    last = all(m.start() <= fact.start() for m in re.finditer(_FACT.format(name=r"\w+"), text))
    return f"{fact.group(2)}." if _chance(text) < (0.95 if last else 0.55) else "unknown"


@functools.cache
def _tokenizer():
    return load_tokenizer("tiktoken:cl100k_base")


def answer(prompt: str) -> str:
    name = re.findall(r"What is the code for (\w+)\?", prompt)[-1]
    fact = re.search(rf"The code for ({name}) is (\w+)\.", prompt)
    if fact is None:
        return "unknown"
    key = _tokenizer().tokenize(prompt).token_at_char(fact.start(1))
    return f"{fact.group(2)}." if key % PERIOD != WEAK else "unknown"


def lenient(completion: str, answers: Sequence[str]) -> bool:
    """A ``module:function`` grader: right when any answer occurs, case-insensitive."""
    return any(a.lower() in completion.lower() for a in answers)


def not_a_bool(completion: str, answers: Sequence[str]) -> str:
    return "yes"
