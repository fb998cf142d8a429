"""Admission, order and the repeat: which chunks, in what order, restated or not.

Pure and keyword-only over token counts and scores (steps 1, 2, 3 and 6 of the
algorithm in :mod:`phaseaware.assembly.plan.planner`, which re-exports every name
here). ``relevance_weights``/``relevance_rank`` are the one definition of a chunk's
relevance that planning and the report share.
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass

from phaseaware.errors import InputError

__all__ = [
    "STRATEGIES",
    "Plan",
    "Admission",
    "relevance_weights",
    "relevance_rank",
    "admit",
    "order_chunks",
    "estimate_keys",
    "search_orders",
    "repeat_candidate",
    "repeat_pays",
]

STRATEGIES = ("reorder", "relevance", "none")


@dataclass(frozen=True)
class Plan:
    """What to render: input indices in context order, their pads, the repeat, the end pad."""

    order: tuple[int, ...]  # input indices, first to last in the context
    pads: tuple[int, ...]  # filler units before each ordered chunk
    repeat: int | None  # input index of the chunk restated before the question
    end_pad: int  # filler units of the end pad


@dataclass(frozen=True)
class Admission:
    """Indices (into the input) admitted, in relevance order, and the dropped ones."""

    admitted: tuple[int, ...]
    dropped: tuple[tuple[int, str], ...]
    tokens_used: int


def relevance_weights(scores: Sequence[float]) -> tuple[float, ...]:
    """Weights in [0, 1]: ``max(score, 0) / max score``; all 1.0 when none is positive."""
    top = max((s for s in scores), default=0.0)
    if top <= 0:
        return tuple(1.0 for _ in scores)
    return tuple(max(s, 0.0) / top for s in scores)


def relevance_rank(scores: Sequence[float]) -> tuple[int, ...]:
    """Indices sorted by descending score, ties in given order (stable)."""
    return tuple(sorted(range(len(scores)), key=lambda i: (-scores[i], i)))


def admit(
    *,
    scores: Sequence[float],
    costs: Sequence[int],
    empty: Sequence[bool],
    budget_left: int,
    in_given_order: bool = False,
) -> Admission:
    """Admit chunks by relevance (or in given order) while their ``costs`` (tokens) fit.

    Empty chunks are dropped with reason ``"empty"``; others that do not fit get
    ``"over budget: needs X tokens, Y left"``. ``budget_left`` is what remains
    after the fixed prefix/suffix (tokens). Nothing is dropped silently.
    """
    if not (len(scores) == len(costs) == len(empty)):
        raise InputError("scores, costs and empty must have one entry per chunk")
    if budget_left < 0:
        raise InputError(f"budget_left must be >= 0, got {budget_left}")
    order = range(len(scores)) if in_given_order else relevance_rank(scores)
    admitted: list[int] = []
    dropped: dict[int, str] = {}
    left = budget_left
    for i in order:
        if empty[i]:
            dropped[i] = "empty"
        elif costs[i] > left:
            dropped[i] = f"over budget: needs {costs[i]} tokens, {left} left"
        else:
            admitted.append(i)
            left -= costs[i]
    return Admission(
        admitted=tuple(admitted),
        dropped=tuple(sorted(dropped.items())),
        tokens_used=budget_left - left,
    )


def order_chunks(
    *, admitted: Sequence[int], scores: Sequence[float], strategy: str, has_profile: bool
) -> tuple[int, ...]:
    """Context order (first to last) of the ``admitted`` input indices."""
    if strategy not in STRATEGIES:
        raise InputError(f"unknown strategy {strategy!r}; choose one of {', '.join(STRATEGIES)}")
    if strategy == "none":
        return tuple(sorted(admitted))
    by_relevance = sorted(admitted, key=lambda i: (-scores[i], i))
    if strategy == "relevance":
        return tuple(by_relevance)
    if has_profile:
        return tuple(reversed(by_relevance))  # most relevant nearest the question
    # Lost in the middle: alternate ranks to the end and the start, top rank last.
    front: list[int] = []
    back: list[int] = []
    for rank, i in enumerate(by_relevance):
        (back if rank % 2 == 0 else front).append(i)
    return tuple(front + list(reversed(back)))


def estimate_keys(
    *,
    start: int,
    order: Sequence[int],
    sizes: Sequence[int],
    key_offsets: Sequence[Sequence[int]],
    sep_tokens: int,
) -> tuple[list[tuple[int, ...]], int]:
    """(unpadded key positions of each ordered chunk, context tokens), from in-context counts.

    Chunk i (input index) takes ``sizes[i]`` tokens, its trailing separator
    included, with keys ``key_offsets[i]`` tokens into it; the first chunk
    starts at token ``start``. The last chunk has no separator after it.
    Verification replaces these estimates with measured positions.
    """
    keys: list[tuple[int, ...]] = []
    position = start
    for i in order:
        offsets = key_offsets[i]
        if len(offsets) == 1:
            keys.append((position + offsets[0],))
        else:
            keys.append(tuple([position + t for t in offsets]))
        position += sizes[i]
    return keys, position - start - sep_tokens


def search_orders(
    *,
    order: Sequence[int],
    evaluate: Callable[[tuple[int, ...]], float],
    max_arrangements: int = 120,
) -> tuple[int, ...]:
    """The best-valued order that keeps ``order[-1]`` last (``order`` wins ties).

    Chunk lengths differ, so the order alone moves key tokens between
    residues: rearranging the chunks before the last one can land their keys
    on reliable residues for free, where padding would cost tokens.
    ``evaluate(candidate)`` scores an order (reliability minus padding cost).
    Every arrangement is tried when there are at most ``max_arrangements``
    (up to 6 chunks); longer lists keep ``order``: their padding is already a
    small share of the context.
    """
    head, last = list(order[:-1]), tuple(order[-1:])
    best = tuple(order)
    if len(head) < 2 or math.factorial(len(head)) > max_arrangements:
        return best
    best_value = evaluate(best)
    for candidate in itertools.permutations(head):
        value = evaluate(candidate + last)
        if value > best_value + 1e-12:
            best, best_value = candidate + last, value
    return best


def repeat_candidate(
    *, order: Sequence[int], scores: Sequence[float], has_keys: Sequence[bool]
) -> int | None:
    """The most relevant ordered chunk (input index) that has key tokens; None if none has."""
    return min((i for i in order if has_keys[i]), key=lambda i: (-scores[i], i), default=None)


def repeat_pays(
    *,
    key_positions: Sequence[int],
    length: int,
    window: int | None,
    cost: int,
    used: int,
    budget: int,
    suffix_tokens: int,
) -> bool:
    """Whether to restate a chunk's evidence (``cost`` tokens) right before the question.

    ``key_positions``: the chunk's keys in a prompt of ``length`` tokens;
    ``used`` tokens are spent before the repeat, of ``budget``. Not when every
    key is already read raw in the local ``window``, when the block does not
    fit, or when the block plus the ``suffix_tokens`` after it would not sit
    in the window itself.
    """
    if window is not None and all(length - t <= window for t in key_positions):
        return False
    if used + cost > budget:
        return False
    return window is None or cost + suffix_tokens <= window
