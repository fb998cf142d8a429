"""Planning: which chunks, in what order, with how much padding.

ALL planning lives here: pure, keyword-only functions over token counts,
key-token offsets and reliabilities; no tokenizer and no string building
(``setup`` measures, ``render`` builds text, ``verify`` re-tokenizes,
``pipeline`` orchestrates). The pad search (steps 3-5) is in the sibling
module ``padding`` (re-exported here) to keep each file short. The
reliabilities come from the profile through ``key_reliability`` and
``position_reliability``, the only two functions here that take a ``Profile``.

Objective. Chunk ``i`` has relevance weight ``w_i`` (scores clipped at 0 and
divided by the largest score; all 1 when no score is positive) and key tokens
at absolute positions ``t_ij``. The plan maximises

    Σ_i (w_i / n_i) Σ_j R(t_ij) − pad_cost · (padding tokens)

subject to ``prompt tokens ≤ budget``, where ``R(t, d)`` is the reliability of a
key at position ``t`` with ``d`` tokens after it: the profile's residue
reliability, or, inside the profile's raw local window (``d ≤ window``), its
measured window accuracy (the best residue's when unmeasured). Dropped chunks
count as reliability 0. Padding before a chunk moves the residues of its keys
and of all later keys; it never brings a key closer to the end of the prompt
(the prompt grows by the same amount), so only padding *after* a key changes
its distance.

Algorithm (N chunks, period P, K key tokens per chunk):
1. ``admit``: sort by relevance (stable), admit each chunk whose tokens (plus
   separator) fit the remaining budget, else drop it with the reason.
   O(N log N) for the sort, O(N) for the scan.
2. ``order_chunks``: "reorder" puts the most relevant chunk last (closest to the
   question: the raw local window is the most reliable place) and, without a
   profile, spreads relevance to both ends (lost-in-the-middle, like
   LangChain's LongContextReorder, but with the top chunk nearest the question);
   "relevance" = most relevant first; "none" = given order. O(N log N).
3. ``search_orders`` ("reorder" with a profile and padding): chunk lengths
   differ, so rearranging the chunks before the last one moves keys between
   residues for free; with at most 6 chunks every arrangement is scored with
   its best pads (``order_scorer``, memoised per chunk and starting residue).
   O(A·N) for A ≤ 120 arrangements, plus O(N·P·P·K) for the memo.
4. ``choose_pads``: left to right with the cumulative shift ``C`` of earlier
   pads, pick k for chunk i maximising Σ_j (w_i/n_i) R(t_ij + C + shift(k), d_ij)
   − pad_cost·shift(k), plus the change its shift makes to earlier keys still
   inside the window, among the smallest k per reachable residue. Outside the
   window every chunk's own pad can reach every residue whatever came before,
   so with free padding (``pad_cost`` 0) and slack to spare the greedy is
   optimal there (a property test checks it against brute force); with a cost
   it does not trade an earlier pad for a cheaper later one, so it may spend a
   few tokens more than the optimum. O(N·P·K) plus the few keys near the end.
5. ``best_pads``, the end pad: each end pad the slack allows is tried, with
   the chunks an end pad can bring into the window re-planned by
   ``choose_pads`` for it; ``pads_value`` scores the result (times the
   profile's length factor, minus the padding cost) and the best plan wins.
   O(N·P·K + E·M·P·K) for E end pads and M chunks near the end; E = 1 unless
   the profile has a length effect or a measured window worse than its best
   residue (``end_pad_reach``).
6. ``repeat_candidate``/``repeat_pays``: the most relevant chunk with keys is
   restated right before the question when its keys are not already read raw
   in the local window, the block fits the budget, and the block itself lands
   in the window.
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

from phaseaware.assembly.plan.padding import (
    NO_PAD,
    PadTable,
    best_pads,
    choose_pads,
    order_scorer,
    pads_value,
)
from phaseaware.errors import InputError

if TYPE_CHECKING:  # pragma: no cover
    from phaseaware.profiles.model import Profile

__all__ = [
    "STRATEGIES",
    "PadTable",
    "PadTables",
    "NO_PAD",
    "Plan",
    "Admission",
    "relevance_weights",
    "relevance_rank",
    "admit",
    "order_chunks",
    "estimate_keys",
    "search_orders",
    "order_scorer",
    "repeat_candidate",
    "repeat_pays",
    "choose_pads",
    "pads_value",
    "best_pads",
    "end_pad_reach",
    "end_reserve",
    "pad_tokens",
    "key_reliability",
    "position_reliability",
    "position_reliabilities",
    "default_position_reliability",
]

STRATEGIES = ("reorder", "relevance", "none")


@dataclass(frozen=True)
class PadTables:
    """The pads planning may use: one table per input chunk, and the end pad's."""

    chunks: tuple[PadTable, ...]  # input order
    end: PadTable | None  # None: no end pad


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


def end_pad_reach(
    *,
    period: int,
    window: int | None,
    window_reliability: float,
    best_reliability: float,
    length_period: int | None,
    pad: bool,
    length_pad: bool,
) -> int:
    """Largest end pad (filler units) worth trying; 0: no end pad.

    The end pad moves the prompt length's residue (``length_pad`` with a
    length effect of period ``length_period``: up to two of its periods) and
    pushes keys out of the raw local window (``pad``, when the window's
    reliability is below the best residue's: up to the window plus a period).
    """
    reach = 0
    if length_pad and length_period is not None:
        reach = 2 * length_period
    if pad and window is not None and window_reliability < best_reliability:
        reach = max(reach, window + period)
    return reach


def end_reserve(
    *, end_shifts: Sequence[int] | None, length_period: int | None, length_pad: bool
) -> int:
    """Tokens kept free for the end pad of a length-residue correction (0: none)."""
    if end_shifts is None or length_period is None or not length_pad:
        return 0
    return max(end_shifts[:length_period])


def pad_tokens(*, tables: PadTables, plan: Plan) -> int:
    """Filler tokens ``plan`` adds by the tables (chunk pads plus the end pad)."""
    total = sum(tables.chunks[i].shifts[k] for i, k in zip(plan.order, plan.pads, strict=True))
    if tables.end is not None:
        total += tables.end.shifts[plan.end_pad]
    return total


def default_position_reliability(position: int, *, prompt_length: int) -> float:
    """Heuristic U-shaped curve (lost in the middle) used when there is no profile.

    0.5 in the middle of the prompt, 1.0 at both ends; not a measurement.
    """
    if prompt_length <= 1:
        return 1.0
    x = position / (prompt_length - 1)
    return 0.5 + 0.5 * (2 * x - 1) ** 2


def key_reliability(profile: Profile | None, *, offset: int = 0) -> Callable[[int, int], float]:
    """Reliability of a key token at ``(position, distance to the prompt's end)``.

    ``position`` indexes the prompt's tokens; the model sees it at ``position +
    offset`` (tokens its server adds first, e.g. a BOS). The profile's own model
    (``Profile.key_reliability_lookup``); without a profile, the lost-in-the-middle
    heuristic.
    """
    if profile is None:
        return lambda t, d: default_position_reliability(t, prompt_length=t + d)
    return profile.key_reliability_lookup(offset=offset)


def position_reliabilities(
    profile: Profile | None, positions: Sequence[int], *, length: int, offset: int = 0
) -> list[float]:
    """``position_reliability(profile, length=length, offset=offset)`` at each position
    (the profile's vectorised form; the heuristic per position without a profile)."""
    if profile is not None:
        return profile.position_reliabilities(positions, length, offset=offset)
    at = position_reliability(None, length=length, offset=offset)
    return [at(t) for t in positions]


def position_reliability(
    profile: Profile | None, *, length: int, offset: int = 0
) -> Callable[[int], float]:
    """Expected accuracy of a key at token t of a ``length``-token prompt.

    The profile's own model (``Profile.position_reliabilities`` at one position: key
    reliability times the length factor); the lost-in-the-middle heuristic without a
    profile. For many positions call ``position_reliabilities``.
    """
    if profile is not None:
        return lambda t: profile.position_reliabilities((t,), length, offset=offset)[0]
    last = length - 1

    def at(t: int) -> float:
        t = min(t, last)
        return default_position_reliability(t, prompt_length=length)

    return at
