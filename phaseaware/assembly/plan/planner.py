"""Planning: which chunks, in what order, with how much padding; the planning stage.

ALL planning lives in ``plan/``: pure, keyword-only functions over token counts,
key-token offsets and reliabilities; no tokenizer and no string building
(``prepare`` measures, ``render`` builds text, ``verify`` re-tokenizes,
``pipeline`` orchestrates). This module is the stage's door: ``prepare`` hands it a
:class:`PlanInput` (numbers and flags only), and it is entered three times per
``assemble``: ``start`` (relevance weights, admission, the repeat candidate, the
naive baseline), ``initial`` (order, repeat, order search, pads) and ``replan``
(pads re-planned from measured positions inside verification's loop). The steps
live in sibling modules, re-exported here: ``order`` (admission, order, repeat),
``padding`` (the pad search and the end pad), ``initial`` (the initial plan),
``baseline`` (the naive baseline) and ``reliability`` (the profile's model).

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

import dataclasses
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

from phaseaware.assembly.plan.baseline import naive_baseline
from phaseaware.assembly.plan.end_pad import end_pad_reach
from phaseaware.assembly.plan.initial import RepeatOffer, initial_plan
from phaseaware.assembly.plan.order import (
    STRATEGIES,
    Admission,
    Plan,
    admit,
    estimate_keys,
    order_chunks,
    relevance_rank,
    relevance_weights,
    repeat_candidate,
    repeat_pays,
    search_orders,
)
from phaseaware.assembly.plan.padding import (
    NO_PAD,
    PadTable,
    PadTables,
    best_pads,
    choose_pads,
    end_reserve,
    freeze_moving,
    kept_search,
    order_scorer,
    pad_tokens,
    pads_value,
)
from phaseaware.assembly.plan.reliability import (
    default_position_reliability,
    key_reliability,
    mean_key_reliability,
    offset_mean,
    position_reliabilities,
    position_reliability,
    weighted_accuracy,
)

if TYPE_CHECKING:  # pragma: no cover
    from phaseaware.profiles.model import Profile

__all__ = [
    "STRATEGIES",
    "PadTable",
    "PadTables",
    "NO_PAD",
    "Plan",
    "PlanInput",
    "PlanStart",
    "Admission",
    "start_plan",
    "initial",
    "replan",
    "freeze_moving",
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


@dataclass(frozen=True)
class PlanInput:
    """What ``prepare`` measured, as the planner reads it: numbers and flags, input order.

    ``sizes``: each chunk's in-context tokens, its trailing separator included;
    ``key_offsets``: its key tokens, relative to its first token; ``tables``: the pads
    the filler allows (before verification froze any). ``offset``: tokens the server
    puts before the prompt (with ``offsets``: the smallest of that set, which the
    chunks are planned for). ``pad``: padding asked for and a filler qualified.
    ``length_period``: the period of the profile's length effect (None: none).
    """

    scores: tuple[float, ...]
    sizes: tuple[int, ...]
    empty: tuple[bool, ...]
    key_offsets: tuple[tuple[int, ...], ...]
    prefix_tokens: int
    suffix_tokens: int
    separator_tokens: int
    budget: int
    tables: PadTables
    profile: Profile | None
    strategy: str
    pad: bool
    pad_cost: float
    repeat: bool
    length_pad: bool
    length_period: int | None
    offset: int
    offsets: tuple[int, ...] | None


@dataclass(frozen=True)
class PlanStart:
    """Planned once per request: relevance ``weights`` and order (``ranked``), the
    ``admitted`` chunks (relevance order) and the ``dropped`` ones with reasons, the ``repeat`` candidate (input index),
    and the naive baseline's expected accuracy at ``offset`` (``naive``) and at each of
    ``offsets`` (``naive_by_offset``, same order; empty without ``offsets``)."""

    weights: tuple[float, ...]
    ranked: tuple[int, ...]  # input indices, most relevant first (``order.relevance_rank``)
    admitted: tuple[int, ...]
    dropped: tuple[tuple[int, str], ...]
    evidence: int | None  # the most relevant admitted chunk with keys (None: no such chunk)
    repeat: int | None  # ``evidence`` when it is offered for the repeat (``PlanInput.repeat``)
    naive: float | None
    naive_by_offset: tuple[float | None, ...]


#: ``(tables, order, estimated or measured unpadded keys per ordered chunk, prompt tokens
#: before the end reserve, slack tokens) -> (pads per ordered chunk, end pad)``.
PadSearch = Callable[
    [PadTables, Sequence[int], Sequence[Sequence[int]], int, int], tuple[tuple[int, ...], int]
]


def start_plan(request: PlanInput) -> PlanStart:
    """Weights, admission within the budget left by the frame and the end reserve, the
    repeat candidate among the admitted, and the naive baseline (planned here once)."""
    reserve = end_reserve(
        end_shifts=request.tables.end.shifts if request.tables.end is not None else None,
        length_period=request.length_period,
        length_pad=request.length_pad,
    )
    base = naive_baseline(
        scores=request.scores,
        sizes=request.sizes,
        empty=request.empty,
        key_offsets=request.key_offsets,
        prefix_tokens=request.prefix_tokens,
        suffix_tokens=request.suffix_tokens,
        separator_tokens=request.separator_tokens,
        budget=request.budget,
    )
    weights = relevance_weights(request.scores)
    ranked = relevance_rank(request.scores)
    fixed = request.prefix_tokens + request.suffix_tokens
    admission = admit(
        scores=request.scores,
        costs=request.sizes,
        empty=request.empty,
        budget_left=max(0, request.budget - fixed - reserve),
    )
    evidence = repeat_candidate(
        order=admission.admitted,
        scores=request.scores,
        has_keys=[bool(k) for k in request.key_offsets],
    )
    keyed = [not e and bool(k) for e, k in zip(request.empty, request.key_offsets, strict=True)]
    naive: list[float | None] = []
    for d in (request.offset, *(request.offsets or ())):
        values = position_reliabilities(
            request.profile, base.key_positions, length=base.length, offset=d
        )
        accuracy: dict[int, float | None] = {}
        at = 0
        for i, n in zip(base.admitted, base.key_counts, strict=True):
            accuracy[i] = sum(values[at : at + n]) / n if n else None
            at += n
        naive.append(weighted_accuracy(weights=weights, keyed=keyed, accuracy=accuracy))
    return PlanStart(
        weights=weights,
        ranked=ranked,
        admitted=admission.admitted,
        dropped=admission.dropped,
        evidence=evidence,
        repeat=evidence if request.repeat else None,
        naive=naive[0],
        naive_by_offset=tuple(naive[1:]),
    )


def initial(
    *,
    request: PlanInput,
    weights: Sequence[float],
    admitted: Sequence[int],
    tables: PadTables,
    repeat: RepeatOffer | None,
) -> Plan:
    """The initial plan of the ``admitted`` chunks (``plan.initial.initial_plan``): order,
    the repeat (``repeat``: the candidate and its measured cost; offered only while the
    candidate is admitted), the order search and the pads, from estimated positions."""
    search, by_model = _pad_search(request, weights)
    reserve = end_reserve(
        end_shifts=tables.end.shifts if tables.end is not None else None,
        length_period=request.length_period,
        length_pad=request.length_pad,
    )
    evaluate = None
    if request.strategy == "reorder" and request.pad and by_model is not None:
        evaluate = order_scorer(
            start=request.prefix_tokens + request.offset,
            sizes=request.sizes,
            key_offsets=request.key_offsets,
            weights=weights,
            residue_reliability=by_model,
            pad_tables=tables.chunks,
            pad_cost=request.pad_cost,
        )
    return initial_plan(
        admitted=admitted,
        scores=request.scores,
        sizes=request.sizes,
        key_offsets=request.key_offsets,
        weights=weights,
        strategy=request.strategy,
        has_profile=request.profile is not None,
        prefix_tokens=request.prefix_tokens,
        suffix_tokens=request.suffix_tokens,
        separator_tokens=request.separator_tokens,
        budget=request.budget,
        reserve=reserve,
        repeat=repeat if repeat is not None and repeat.chunk in admitted else None,
        search=evaluate,
        pads=lambda order, keys, length, slack: search(tables, order, keys, length, slack),
    )


def replan(
    *,
    request: PlanInput,
    weights: Sequence[float],
    tables: PadTables,
    plan: Plan,
    base_keys: Sequence[Sequence[int]],
    measured_tokens: int,
    freeze: bool,
) -> tuple[Plan, PadTables]:
    """``plan`` re-padded for the measured unpadded key positions ``base_keys`` of a prompt
    that measured ``measured_tokens``; ``plan`` itself (the same object) when confirmed.

    With ``freeze``, the chunks (and end pad) whose pads moved are frozen unpadded
    (``freeze_moving``: new tables) and the pads planned again with them.
    """
    search, _ = _pad_search(request, weights)
    length = measured_tokens - pad_tokens(tables=tables, plan=plan)
    slack = (
        request.budget
        - length
        - end_reserve(
            end_shifts=tables.end.shifts if tables.end is not None else None,
            length_period=request.length_period,
            length_pad=request.length_pad,
        )
    )
    pads, end_k = search(tables, plan.order, base_keys, length, slack)
    if pads == plan.pads and end_k == plan.end_pad:
        return plan, tables
    if freeze:
        tables = freeze_moving(tables, plan, pads=pads, end_pad=end_k)
        # base_keys stay the measured ones
        pads, end_k = search(tables, plan.order, base_keys, length, slack)
    return dataclasses.replace(plan, pads=pads, end_pad=end_k), tables


def _pad_search(
    request: PlanInput, weights: Sequence[float]
) -> tuple[PadSearch, list[float] | None]:
    """The request's pad search (``padding.best_pads`` with the profile's reliabilities, their
    mean over ``offsets`` where given: ``reliability.offset_mean``), and the reliability by
    model residue at ``offset`` that the order search scores with (None: no profile, no
    padding)."""
    profile = request.profile
    if profile is None:
        return (lambda tables, order, keys, length, slack: (tuple(0 for _ in order), 0)), None
    offset, period = request.offset, profile.period
    offsets = request.offsets or (offset,)
    by_model = [profile.residue_reliability(r) for r in range(period)]
    residue_values = offset_mean(by_model, offsets=offsets)
    reliability = mean_key_reliability(profile, offsets=offsets)
    if request.offsets:  # by model residue at ``offset``: the order scorer adds it itself
        by_model = [residue_values[(r - offset) % period] for r in range(period)]

    def length_factor(prompt_tokens: int) -> float:
        return profile.length_factor(prompt_tokens + offset)

    def search(
        tables: PadTables,
        order: Sequence[int],
        base_keys: Sequence[Sequence[int]],
        length: int,
        slack: int,
    ) -> tuple[tuple[int, ...], int]:
        end_shifts = tables.end.shifts if tables.end is not None else None
        return best_pads(
            key_positions=base_keys,
            weights=[weights[i] for i in order],
            pad_tables=[tables.chunks[i] for i in order],
            end_shifts=end_shifts,
            period=period,
            window=profile.local_window,
            reliability=reliability,
            length_factor=length_factor,
            pad=request.pad,
            pad_cost=request.pad_cost,
            length=length,
            slack=max(0, slack)
            + end_reserve(
                end_shifts=end_shifts,
                length_period=request.length_period,
                length_pad=request.length_pad,
            ),
            residue_values=residue_values,
        )

    r = request
    settings = (offset, r.offsets, r.pad, r.pad_cost, r.length_period, r.length_pad)
    return kept_search(search, profile=profile, settings=settings, weights=weights), by_model
