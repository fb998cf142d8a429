"""The initial plan: order, repeat, order search and pads, from token counts alone.

Pure and keyword-only, like the rest of ``plan/``: integers and reliabilities in, a
:class:`~phaseaware.assembly.plan.order.Plan` out. What needs a tokenizer is measured
before planning and handed in as numbers (``RepeatOffer.cost``: the repeat block's
tokens); the order search's scorer (``padding.order_scorer``) and the pad search
(``padding.best_pads`` over the request's pad tables) are built by ``planner`` and
passed as ``search`` and ``pads``, so that this module stays free of profiles and
filler text. Verification
later replaces the estimated key positions with measured ones.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass

from phaseaware.assembly.plan.order import (
    Plan,
    estimate_keys,
    order_chunks,
    repeat_pays,
    search_orders,
)

__all__ = ["OrderScorer", "PadPlanner", "RepeatOffer", "initial_plan"]

#: ``(order, estimated keys per ordered chunk, prompt tokens before the end reserve,
#: slack tokens) -> (pads per ordered chunk, end pad)``: the pad search.
PadPlanner = Callable[
    [Sequence[int], Sequence[Sequence[int]], int, int], tuple[tuple[int, ...], int]
]


@dataclass(frozen=True)
class RepeatOffer:
    """The repeat candidate (input index) and its measured ``cost`` in tokens
    (separator included); ``window``: the profile's raw local window (None: none)."""

    chunk: int
    cost: int
    window: int | None


#: ``candidate order -> value`` (reliability minus padding cost): ``padding.order_scorer``.
OrderScorer = Callable[[tuple[int, ...]], float]


def initial_plan(
    *,
    admitted: Sequence[int],
    scores: Sequence[float],
    sizes: Sequence[int],
    key_offsets: Sequence[Sequence[int]],
    weights: Sequence[float],
    strategy: str,
    has_profile: bool,
    prefix_tokens: int,
    suffix_tokens: int,
    separator_tokens: int,
    budget: int,
    reserve: int,
    repeat: RepeatOffer | None,
    search: OrderScorer | None,
    pads: PadPlanner,
) -> Plan:
    """Order the ``admitted`` chunks, decide the repeat, search orders, then pad.

    ``reserve``: tokens kept free for the end pad. The repeat is taken when
    ``planner.repeat_pays`` says so for the order's estimated keys; the order search
    (``search``, None: keep the strategy's order) scores arrangements with
    ``padding.order_scorer``. Invariant: ``sorted(plan.order) == sorted(admitted)``.
    """
    order = order_chunks(
        admitted=admitted, scores=scores, strategy=strategy, has_profile=has_profile
    )

    def estimate(candidate: Sequence[int]) -> tuple[list[tuple[int, ...]], int]:
        return estimate_keys(
            start=prefix_tokens, order=candidate, sizes=sizes, key_offsets=key_offsets,
            sep_tokens=separator_tokens,
        )  # fmt: skip

    keys, context_tokens = estimate(order)
    used = prefix_tokens + suffix_tokens + context_tokens + reserve
    repeated = repeat is not None and repeat_pays(
        key_positions=keys[list(order).index(repeat.chunk)],
        length=used - reserve,
        window=repeat.window,
        cost=repeat.cost,
        used=used,
        budget=budget,
        suffix_tokens=suffix_tokens,
    )
    if repeated and repeat is not None:
        used += repeat.cost
    length, slack = used - reserve, budget - used
    if search is not None:
        searched = search_orders(order=order, evaluate=search)
        if searched != tuple(order):
            order = searched
            keys, _ = estimate(order)
    chosen_pads, end_pad = pads(order, keys, length, slack)
    return Plan(
        order=tuple(order),
        pads=chosen_pads,
        repeat=repeat.chunk if repeated and repeat is not None else None,
        end_pad=end_pad,
    )
