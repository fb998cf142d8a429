"""Planning: which chunks, in what order, with how much padding.

Pure, keyword-only functions over token counts and key-token offsets; no
tokenizer and no string building here (``assembly`` renders and verifies).

Objective. Chunk ``i`` has relevance weight ``w_i`` (scores clipped at 0 and
divided by the largest score; all 1 when no score is positive) and key tokens
at absolute positions ``t_ij``. The plan maximises

    Σ_i (w_i / n_i) Σ_j R(t_ij) − pad_cost · (padding tokens)

subject to ``prompt tokens ≤ budget``, where ``R`` is the position reliability
(the profile's residue reliability, or the best residue inside the profile's
raw local window). Dropped chunks count as reliability 0.

Algorithm (N chunks, period P, K key tokens per chunk, all linear in N):
1. ``admit``: sort by relevance (stable), admit each chunk whose tokens (plus
   separator) fit the remaining budget, else drop it with the reason.
   O(N log N) for the sort, O(N) for the scan.
2. ``order_chunks``: "reorder" puts the most relevant chunk last (closest to the
   question: the raw local window is the most reliable place) and, without a
   profile, spreads relevance to both ends (lost-in-the-middle, like
   LangChain's LongContextReorder, but with the top chunk nearest the question);
   "relevance" = most relevant first; "none" = given order. O(N log N).
3. ``choose_pads``: left to right with the cumulative shift ``C`` of earlier
   pads, pick k for chunk i maximising Σ_j (w_i/n_i) R(t_ij + C + shift(k)) −
   pad_cost·shift(k) among the smallest k per reachable residue. Because every
   chunk's own pad can reach every residue whatever came before, this greedy is
   optimal when the budget slack does not bind. O(N·P·K).
4. ``choose_length_pad``: the smallest end pad that moves the total prompt
   length onto the best known length residue. O(P).
"""

from __future__ import annotations

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
    "choose_pads",
    "choose_length_pad",
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


def choose_pads(
    *,
    key_positions: Sequence[Sequence[int]],
    weights: Sequence[float],
    period: int,
    reliability: Callable[[int], float],
    pad_tables: Sequence[PadTable],
    pad_cost: float,
    slack: int,
) -> tuple[int, ...]:
    """Filler units ``k`` before each chunk (in context order).

    ``key_positions[i]`` are chunk i's key token positions when no chunk is
    padded; ``reliability(position)`` is the expected accuracy of a key token
    there; ``pad_tables[i]`` gives the tokens added by k filler units before
    chunk i; ``slack`` is the number of tokens the budget leaves for padding.
    Each chunk's k is one of the smallest k reaching each residue mod ``period``.
    """
    cache: dict[int, tuple[tuple[int, int], ...]] = {}
    ks: list[int] = []
    shift_so_far = 0
    for keys, weight, table in zip(key_positions, weights, pad_tables, strict=True):
        if not keys or weight <= 0:
            ks.append(0)
            continue
        if id(table) not in cache:
            cache[id(table)] = _pad_options(table, period)
        options = cache[id(table)]
        per_key = weight / len(keys)
        single = keys[0] if len(keys) == 1 else None
        best_k, best_value, best_shift = 0, None, 0
        for k, shift in options:
            if shift > slack:
                continue
            offset = shift_so_far + shift
            if single is not None:  # == sum([x]) exactly; skips the generator
                value = per_key * reliability(single + offset)
            else:
                value = sum(per_key * reliability(t + offset) for t in keys)
            value -= pad_cost * shift
            if best_value is None or value > best_value + 1e-12:
                best_k, best_value, best_shift = k, value, shift
        ks.append(best_k)
        shift_so_far += best_shift
        slack -= best_shift
    return tuple(ks)


def _pad_options(pad_table: PadTable, period: int) -> tuple[tuple[int, int], ...]:
    """(k, shift) for the smallest k reaching each residue, ordered by k."""
    options: dict[int, tuple[int, int]] = {}
    for k, shift in enumerate(pad_table.shifts):
        options.setdefault(shift % period, (k, shift))
    return tuple(sorted(options.values()))


def choose_length_pad(
    *, length: int, length_factor: Callable[[int], float], pad_table: PadTable, slack: int
) -> int:
    """Smallest end-pad k maximising ``length_factor(length + shift(k))`` within ``slack``."""
    best_k, best_value = 0, length_factor(length)
    for k, shift in enumerate(pad_table.shifts):
        if shift > slack:
            break
        value = length_factor(length + shift)
        if value > best_value + 1e-12:
            best_k, best_value = k, value
    return best_k


def default_position_reliability(position: int, *, prompt_length: int) -> float:
    """Heuristic U-shaped curve (lost in the middle) used when there is no profile.

    0.5 in the middle of the prompt, 1.0 at both ends; not a measurement.
    """
    if prompt_length <= 1:
        return 1.0
    x = position / (prompt_length - 1)
    return 0.5 + 0.5 * (2 * x - 1) ** 2
