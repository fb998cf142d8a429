"""The retrieval task text: records, questions and filler prose.

One definition shared by calibration probes, the reference model's training
data and the RAG demo, so that the reference model is probed on exactly the
text it was trained on. Every word here is plain ASCII; names and numbers are
single words, so a word-level tokenizer keeps each one a single token.

A *record* states a fact ``The access code for <name> is <number> .``; its key
token is the first token of ``<name>`` (the answer follows the key). The
question asks ``What is the access code for <name> ?``.
"""

from __future__ import annotations

import re

import numpy as np

__all__ = [
    "NAMES",
    "NUMBERS",
    "FILLER_WORDS",
    "record_text",
    "question_text",
    "filler_sentence",
    "extract_answer",
    "vocabulary",
]

NAMES: tuple[str, ...] = tuple(
    """
    Alice Bruno Carla Dmitri Elena Farid Greta Hiro Ines Jonas Kira Lars Mina Noor Oskar Priya
    Quinn Rosa Sven Tara Umar Vera Wanda Xavier Yara Zane Abel Beatrix Cyrus Delia Emil Freya
    Gideon Hana Ivo Jada Kofi Lena Milo Nadia Otto Pia Rafael Selma Tomas Una Viktor Wren
    Yusuf Zora Anika Boris Celia Dario Edith Felix Gemma Hugo Irma Joel Kaia Leon Maren Nils
    """.split()
)

NUMBERS: tuple[str, ...] = tuple(str(v) for v in range(100, 400))

FILLER_WORDS: dict[str, tuple[str, ...]] = {
    "det": ("the", "a", "every", "one", "that"),
    "adj": (
        "quiet",
        "green",
        "old",
        "small",
        "bright",
        "cold",
        "busy",
        "narrow",
        "distant",
        "wooden",
        "silver",
        "gentle",
        "late",
        "early",
        "heavy",
        "open",
    ),
    "noun": (
        "river",
        "garden",
        "window",
        "market",
        "train",
        "forest",
        "letter",
        "harbor",
        "bridge",
        "valley",
        "lamp",
        "kitchen",
        "station",
        "meadow",
        "tower",
        "village",
    ),
    "verb": (
        "waits",
        "turns",
        "rests",
        "shines",
        "moves",
        "sleeps",
        "falls",
        "grows",
        "drifts",
        "stands",
        "opens",
        "fades",
    ),
    "prep": ("near", "behind", "under", "beside", "beyond", "across"),
}

_ANSWER = re.compile(r"\d+")


def record_text(name: str, number: str) -> str:
    """The sentence that states one fact; the key token is ``name``'s first token."""
    return f"The access code for {name} is {number} ."


def question_text(name: str) -> str:
    return f"What is the access code for {name} ?"


def filler_sentence(rng: np.random.Generator) -> str:
    """One seeded filler sentence of 8 words ending in `` .``."""
    w = FILLER_WORDS

    def pick(kind: str) -> str:
        options = w[kind]
        return options[int(rng.integers(len(options)))]

    words = [
        pick("det"),
        pick("adj"),
        pick("noun"),
        pick("verb"),
        pick("prep"),
        pick("det"),
        pick("adj"),
        pick("noun"),
    ]
    words[0] = words[0].capitalize()
    return " ".join(words) + " ."


def extract_answer(completion: str) -> str | None:
    """The first number in a completion, or ``None`` when it holds no number."""
    match = _ANSWER.search(completion)
    return match.group(0) if match else None


def vocabulary() -> list[str]:
    """Every word the task text can contain (for word-level tokenizers), sorted."""
    words = set(NAMES) | set(NUMBERS)
    for options in FILLER_WORDS.values():
        words.update(options)
        words.update(o.capitalize() for o in options)
    words.update("The access code for is What ? .".split())
    return sorted(words)
