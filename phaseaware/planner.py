"""Planning: which chunks, in what order, with how much padding.

Pure, keyword-only functions over token counts and key-token offsets; no
tokenizer and no string building here (``assembly`` renders and verifies).

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
5. The end pad (``assembly``): each end pad the slack allows is tried, with
   the chunks an end pad can bring into the window re-planned by
   ``choose_pads`` for it; ``pads_value`` scores the result (times the
   profile's length factor, minus the padding cost) and the best plan wins.
   O(N·P·K + E·M·P·K) for E end pads and M chunks near the end; E = 1 unless
   the profile has a length effect or a measured window worse than its best
   residue.
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass

from phaseaware.errors import InputError
from phaseaware.filler import PadTable

__all__ = [
    "STRATEGIES",
    "Admission",
    "relevance_weights",
    "relevance_rank",
    "admit",
    "order_chunks",
    "search_orders",
    "choose_pads",
    "pads_value",
    "default_position_reliability",
]

STRATEGIES = ("reorder", "relevance", "none")


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


def order_scorer(
    *,
    start: int,
    sizes: Sequence[int],
    key_offsets: Sequence[Sequence[int]],
    weights: Sequence[float],
    residue_reliability: Sequence[float],
    pad_tables: Sequence[PadTable],
    pad_cost: float,
) -> Callable[[tuple[int, ...]], float]:
    """A fast ``evaluate`` for ``search_orders``: the padded value of an order.

    Chunk i (input index) takes ``sizes[i]`` tokens with keys at
    ``key_offsets[i]`` within it; the first chunk starts at ``start``. Each
    chunk gets the best own pad for the residue it starts on (as
    ``choose_pads`` does), scored with the residue reliabilities alone: the
    raw window and the slack are left to the final ``choose_pads``. Best pads
    are memoised per (chunk, starting residue), so an order costs O(N).
    """
    period = len(residue_reliability)
    memo: dict[tuple[int, int], tuple[float, int]] = {}
    options: dict[int, tuple[tuple[int, int], ...]] = {}
    rel = list(residue_reliability)

    def best_pad(i: int, residue: int) -> tuple[float, int]:
        keys, weight = key_offsets[i], weights[i]
        if not keys or weight <= 0:
            return 0.0, 0
        table = pad_tables[i]
        if id(table) not in options:
            options[id(table)] = _pad_options(table, period)
        per_key = weight / len(keys)
        # key residues relative to the chunk start, counted once per residue
        counts = [0] * period
        for t in keys:
            counts[t % period] += 1
        present = [(r, c) for r, c in enumerate(counts) if c]
        best: tuple[float, int] | None = None
        for _, shift in options[id(table)]:
            base = residue + shift
            value = per_key * sum(c * rel[(base + r) % period] for r, c in present)
            value -= pad_cost * shift
            if best is None or value > best[0] + 1e-12:
                best = (value, shift)
        assert best is not None
        return best

    def score(order: tuple[int, ...]) -> float:
        total, position = 0.0, start
        for i in order:
            residue = position % period
            if (i, residue) not in memo:
                memo[i, residue] = best_pad(i, residue)
            value, shift = memo[i, residue]
            total += value
            position += shift + sizes[i]
        return total

    return score


def choose_pads(
    *,
    key_positions: Sequence[Sequence[int]],
    weights: Sequence[float],
    period: int,
    reliability: Callable[[int, int], float],
    pad_tables: Sequence[PadTable],
    pad_cost: float,
    slack: int,
    length: int,
    tail: int = 0,
    window: int | None = None,
) -> tuple[int, ...]:
    """Filler units ``k`` before each chunk (in context order).

    ``key_positions[i]`` are chunk i's key token positions when no chunk is
    padded and ``length`` is that unpadded prompt's length; ``tail`` tokens
    (an end pad) will follow the last chunk. ``reliability(position, distance)``
    is the expected accuracy of a key token at absolute ``position`` with
    ``distance`` tokens from it to the end of the final prompt.
    ``pad_tables[i]`` gives the tokens added by k filler units before chunk i;
    ``slack`` is the number of tokens the budget leaves for padding. Each
    chunk's k is one of the smallest k reaching each residue mod ``period``.

    A pad moves every later key (its residue) and lengthens the distance of
    every earlier key to the end; it never moves a key closer to the end.
    ``window``: reliability no longer depends on the distance beyond it
    (``None``: it never does), so only earlier keys within ``window`` of the end
    are re-scored when a later pad pushes them away.
    """
    cache: dict[int, tuple[tuple[int, int], ...]] = {}
    ks: list[int] = []
    shift_so_far = 0
    # earlier keys whose reliability may still change: (position, distance, weight per key)
    near: list[tuple[int, int, float]] = []
    for keys, weight, table in zip(key_positions, weights, pad_tables, strict=True):
        if not keys or weight <= 0:
            ks.append(0)
            continue
        if id(table) not in cache:
            cache[id(table)] = _pad_options(table, period)
        per_key = weight / len(keys)
        dists = [length - t + tail for t in keys]  # a pad before the chunk leaves them as is
        single = (keys[0], dists[0]) if len(keys) == 1 else None
        best_k, best_value, best_shift = 0, None, 0
        for k, shift in cache[id(table)]:
            if shift > slack:
                continue
            offset = shift_so_far + shift
            if single is not None:  # one key: skip the generator (hot path)
                value = per_key * reliability(single[0] + offset, single[1])
            else:
                value = per_key * sum(
                    reliability(t + offset, d) for t, d in zip(keys, dists, strict=True)
                )
            for position, distance, w in near:
                value += w * (
                    reliability(position, distance + shift) - reliability(position, distance)
                )
            value -= pad_cost * shift
            if best_value is None or value > best_value + 1e-12:
                best_k, best_value, best_shift = k, value, shift
        ks.append(best_k)
        shift_so_far += best_shift
        slack -= best_shift
        if window is not None:
            near = [(p, d + best_shift, w) for p, d, w in near if d + best_shift <= window]
            near += [
                (t + shift_so_far, length - t + tail, per_key)
                for t in keys
                if length - t + tail <= window
            ]
    return tuple(ks)


def pads_value(
    *,
    key_positions: Sequence[Sequence[int]],
    weights: Sequence[float],
    reliability: Callable[[int, int], float],
    shifts: Sequence[int],
    length: int,
    tail: int = 0,
) -> float:
    """``Σ_i (w_i / n_i) Σ_j reliability(final position, final distance)`` of a padding.

    ``shifts[i]`` tokens are added right before chunk i (context order) and
    ``tail`` after the last chunk; positions and ``length`` are unpadded.
    """
    total_pad = sum(shifts) + tail
    value, before = 0.0, 0
    for keys, weight, shift in zip(key_positions, weights, shifts, strict=True):
        before += shift
        if not keys or weight <= 0:
            continue
        per_key = weight / len(keys)
        for t in keys:
            value += per_key * reliability(t + before, length + total_pad - (t + before))
    return value


def _pad_options(pad_table: PadTable, period: int) -> tuple[tuple[int, int], ...]:
    """(k, shift) for the smallest k reaching each residue, ordered by k."""
    options: dict[int, tuple[int, int]] = {}
    for k, shift in enumerate(pad_table.shifts):
        options.setdefault(shift % period, (k, shift))
    return tuple(sorted(options.values()))


def default_position_reliability(position: int, *, prompt_length: int) -> float:
    """Heuristic U-shaped curve (lost in the middle) used when there is no profile.

    0.5 in the middle of the prompt, 1.0 at both ends; not a measurement.
    """
    if prompt_length <= 1:
        return 1.0
    x = position / (prompt_length - 1)
    return 0.5 + 0.5 * (2 * x - 1) ** 2
