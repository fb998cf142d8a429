"""Seeded synthetic retrieval sequences for training and probing the reference model.

A sequence is exactly what the chat template renders for one user turn plus
the answer: ``<bos> <|user|> CONTEXT QUESTION <|assistant|> NUMBER <eos>``.
CONTEXT mixes filler sentences with records (distinct names); 1-3 short
fragments of filler nouns ending in ``.`` (like calibration's pad zones)
absorb the leftover length, so key positions cover every residue. All positions and lengths are in tokens (one word = one token).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from phaseaware.calibration.task import (
    FILLER_WORDS,
    NAMES,
    NUMBERS,
    filler_sentence,
    question_text,
    record_text,
)
from phaseaware.reference.tokenizer_build import ASSISTANT, BOS, EOS, USER

__all__ = ["Example", "make_example", "make_recall_example", "PREFIX_TOKENS", "TURN_TOKENS"]

PREFIX_TOKENS = 2  # "<bos> <|user|>"
_FIXED_TOKENS = PREFIX_TOKENS + 8 + 1 + 2  # question, <|assistant|>, number, <eos>
TURN_TOKENS = 1 + 8 + 1 + 2  # a follow-up turn: <|user|> question <|assistant|> number <eos>


@dataclass(frozen=True)
class Example:
    """One sequence; ``key_position`` = absolute index of the target name token."""

    text: str
    prompt: str
    answer: str
    key_position: int
    answer_position: int  # index of the answer token in the full sequence
    repeat_answer_positions: tuple[int, ...] = ()  # numbers of repeated records


def _fragment(rng: np.random.Generator, n_tokens: int) -> str:
    words = [str(rng.choice(FILLER_WORDS["noun"])) for _ in range(n_tokens - 1)]
    return " ".join([*words, "."])


def _split(rng: np.random.Generator, total: int) -> list[int]:
    """``total`` tokens as 1-3 positive fragment sizes (none when ``total`` is 0)."""
    if total <= 0:
        return []
    parts = min(total, int(rng.integers(1, 4)))
    cuts = sorted(rng.choice(np.arange(1, total), size=parts - 1, replace=False).tolist())
    return [b - a for a, b in zip([0, *cuts], [*cuts, total], strict=True)]


def make_example(
    rng: np.random.Generator,
    *,
    total_tokens: int,
    n_records: int = 3,
    repeats: int = 0,
    names_pool: Sequence[str] = NAMES,
    numbers_pool: Sequence[str] = NUMBERS,
    questions: int = 1,
    target_last: bool = False,
) -> Example:
    """A sequence of exactly ``total_tokens`` tokens (>= about 48).

    ``repeats`` records are stated a second time after every first statement;
    the positions of their numbers (predictable only by recalling the first
    statement) are ``repeat_answer_positions`` (a denser training signal).
    ``questions`` > 1 adds follow-up chat turns, each asking about another
    record (``<|user|> QUESTION <|assistant|> NUMBER <eos>``, 12 tokens); their
    answers' positions join ``repeat_answer_positions``. The first question and
    ``key_position`` are unchanged by them. ``target_last`` puts the asked
    record (or its restatement) last, right before the question, so that its
    key sits inside the raw local window of the answer.
    """
    if not 1 <= questions <= n_records:
        raise ValueError(f"questions={questions} must be between 1 and n_records={n_records}")
    names = rng.choice(len(names_pool), size=n_records, replace=False)
    numbers = rng.choice(len(numbers_pool), size=n_records, replace=False)
    records = [
        record_text(names_pool[n], numbers_pool[v]) for n, v in zip(names, numbers, strict=True)
    ]
    budget = (
        total_tokens - _FIXED_TOKENS - 8 * (n_records + repeats) - TURN_TOKENS * (questions - 1)
    )
    if budget < 0:
        raise ValueError(f"total_tokens={total_tokens} too small for {n_records} records")
    n_sentences = max(0, budget // 9 - int(rng.integers(0, 2)))
    units = [filler_sentence(rng) for _ in range(n_sentences)]
    for size in _split(rng, budget - 9 * n_sentences):
        units.insert(int(rng.integers(len(units) + 1)), _fragment(rng, size))
    n_slots = n_records + repeats
    last = len(units) + n_slots - 1
    if target_last:
        slots = [*sorted(rng.choice(last, size=n_slots - 1, replace=False)), last]
    else:
        slots = sorted(rng.choice(last + 1, size=n_slots, replace=False))
    order = [*rng.permutation(n_records), *rng.integers(n_records, size=repeats)]
    target = int(order[-1]) if target_last else int(rng.integers(n_records))
    pieces: list[str] = []
    key_position = -1
    pos = PREFIX_TOKENS
    unit_iter = iter(units)
    repeat_positions: list[int] = []
    for i in range(len(units) + n_slots):
        if i in slots:
            k = slots.index(i)
            r = order[k]
            if k >= n_records:
                repeat_positions.append(pos + 6)  # "The access code for <name> is <number>"
            elif r == target and not target_last:
                key_position = pos + 4  # "The access code for <name>"
            if target_last and k == n_slots - 1:
                key_position = pos + 4  # the statement right before the question
            piece = records[r]
        else:
            piece = next(unit_iter)
        pieces.append(piece)
        pos += len(piece.split())
    prompt = " ".join([BOS, USER, *pieces, question_text(names_pool[names[target]]), ASSISTANT])
    answer = numbers_pool[numbers[target]]
    text = f"{prompt} {answer} {EOS}"
    n_prompt = len(prompt.split())
    others = [r for r in rng.permutation(n_records) if r != target][: questions - 1]
    for r in others:
        turn = f"{USER} {question_text(names_pool[names[r]])} {ASSISTANT}"
        repeat_positions.append(len(text.split()) + len(turn.split()))
        text = f"{text} {turn} {numbers_pool[numbers[r]]} {EOS}"
    assert len(text.split()) == total_tokens, (len(text.split()), total_tokens)
    return Example(text, prompt, answer, key_position, n_prompt, tuple(repeat_positions))


def make_recall_example(
    rng: np.random.Generator, *, total_tokens: int, pairs: int = 8, qa: bool = False
) -> Example:
    """A dense recall sequence for a first curriculum stage (no prose).

    ``<bos> <|user|>`` then filler words with ``pairs`` adjacent ``Name Number``
    pairs in the first half and the same pairs again, shuffled, in the second
    half, then ``<eos>``. Every repeated number is predicted at its repeated
    name (``repeat_answer_positions``); ``answer_position`` is the last one.

    ``qa`` gives the pairs the task's shape instead: ``Name is Number`` in the
    first half and ``Name ? <|assistant|> Number`` in the second, so each
    number is predicted at an assistant marker two tokens after the name, as
    in a real question.
    """
    stated = ["{name}", "is", "{number}"] if qa else ["{name}", "{number}"]
    asked = ["{name}", "?", ASSISTANT, "{number}"] if qa else stated
    step1, step2 = len(stated) + 1, len(asked) + 1
    body = total_tokens - PREFIX_TOKENS - 1
    half = body * step1 // (step1 + step2)
    if half // step1 < pairs or (body - half) // step2 < pairs:
        raise ValueError(f"total_tokens={total_tokens} too small for {pairs} pairs")
    fillers = FILLER_WORDS["noun"] + FILLER_WORDS["adj"]
    words = [str(w) for w in rng.choice(fillers, size=body)]
    names = rng.choice(len(NAMES), size=pairs, replace=False)
    numbers = rng.choice(len(NUMBERS), size=pairs, replace=False)
    first = sorted(rng.choice(half // step1, size=pairs, replace=False) * step1)
    second = sorted(half + rng.choice((body - half) // step2, size=pairs, replace=False) * step2)

    def put(slot: int, shape: list[str], i: int) -> int:
        for k, w in enumerate(shape):
            words[slot + k] = w.format(name=NAMES[names[i]], number=NUMBERS[numbers[i]])
        return slot + len(shape) - 1  # the number's index

    for i, slot in enumerate(first):
        put(slot, stated, i)
    order = rng.permutation(pairs)
    answers = tuple(
        PREFIX_TOKENS + put(slot, asked, i) for slot, i in zip(second, order, strict=True)
    )
    words = words[: answers[-1] - PREFIX_TOKENS + 1]  # end right after the last repeated number
    text = " ".join([BOS, USER, *words, EOS])
    last = int(order[-1])
    return Example(
        text=text,
        prompt=" ".join([BOS, USER, *words[:-1]]),
        answer=NUMBERS[numbers[last]],
        key_position=PREFIX_TOKENS + first[last],
        answer_position=answers[-1],
        repeat_answer_positions=answers[:-1],
    )
