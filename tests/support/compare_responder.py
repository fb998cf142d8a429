"""A simulated model for ``phaseaware compare --backend callable`` tests.

It reads the prompt as a model would: it finds the asked name's fact, tokenizes the
whole prompt with cl100k (the run's tokenizer) and answers right unless the name's
first token sits at a weak residue (mod 4), where it answers ``unknown``.
"""

from __future__ import annotations

import functools
import re
from collections.abc import Sequence

from phaseaware.tokenizers import load_tokenizer

PERIOD = 4
WEAK = 3


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
