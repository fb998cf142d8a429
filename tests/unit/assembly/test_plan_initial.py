"""The initial plan and the naive baseline: pure functions over token counts (plan/)."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from phaseaware.assembly.plan import planner
from phaseaware.assembly.plan.baseline import naive_baseline
from phaseaware.assembly.plan.initial import RepeatOffer, initial_plan


@st.composite
def requests(draw: st.DrawFn) -> dict:
    n = draw(st.integers(1, 6))
    sizes = draw(st.lists(st.integers(1, 40), min_size=n, max_size=n))
    keys = [tuple(sorted(draw(st.sets(st.integers(0, s - 1), max_size=3)))) for s in sizes]
    scores = draw(st.lists(st.floats(0, 1, allow_nan=False), min_size=n, max_size=n))
    prefix, suffix = draw(st.integers(0, 30)), draw(st.integers(0, 30))
    return {
        "sizes": sizes,
        "key_offsets": keys,
        "scores": scores,
        "prefix": prefix,
        "suffix": suffix,
        "sep": draw(st.integers(0, 2)),
        "budget": prefix + suffix + draw(st.integers(0, 300)),  # setup refuses less
        "strategy": draw(st.sampled_from(planner.STRATEGIES)),
        "cost": draw(st.integers(1, 60)),
        "window": draw(st.one_of(st.none(), st.integers(1, 64))),
    }


@settings(max_examples=200, deadline=None)
@given(requests())
def test_initial_plan_keeps_the_admitted_chunks_and_asks_the_pad_search_once(r: dict) -> None:
    n = len(r["sizes"])
    admitted = tuple(range(n))
    top = planner.repeat_candidate(
        order=admitted, scores=r["scores"], has_keys=[bool(k) for k in r["key_offsets"]]
    )
    offer = None if top is None else RepeatOffer(chunk=top, cost=r["cost"], window=r["window"])
    asked: list[tuple[tuple[int, ...], int, int]] = []

    def pads(order, keys, length, slack):  # type: ignore[no-untyped-def]
        asked.append((tuple(order), length, slack))
        return tuple(0 for _ in order), 0

    plan = initial_plan(
        admitted=admitted, scores=r["scores"], sizes=r["sizes"], key_offsets=r["key_offsets"],
        weights=planner.relevance_weights(r["scores"]), strategy=r["strategy"], has_profile=True,
        prefix_tokens=r["prefix"], suffix_tokens=r["suffix"], separator_tokens=r["sep"],
        budget=r["budget"], reserve=0, repeat=offer, search=None, pads=pads,
    )  # fmt: skip
    assert sorted(plan.order) == list(admitted)
    assert plan.order == planner.order_chunks(
        admitted=admitted, scores=r["scores"], strategy=r["strategy"], has_profile=True
    )
    assert plan.repeat in (None, top)
    assert len(asked) == 1 and asked[0][0] == plan.order
    # the repeat is spent from the slack the pad search is given, and only when it fits
    context = sum(r["sizes"]) - r["sep"]
    used = r["prefix"] + r["suffix"] + context
    spent = r["cost"] if plan.repeat is not None else 0
    assert asked[0][1] == used + spent and asked[0][2] == r["budget"] - used - spent
    if plan.repeat is not None:
        assert used + r["cost"] <= r["budget"]


@settings(max_examples=200, deadline=None)
@given(requests())
def test_naive_baseline_is_the_given_order_without_pads(r: dict) -> None:
    n = len(r["sizes"])
    base = naive_baseline(
        scores=r["scores"], sizes=r["sizes"], empty=[False] * n, key_offsets=r["key_offsets"],
        prefix_tokens=r["prefix"], suffix_tokens=r["suffix"], separator_tokens=r["sep"],
        budget=r["budget"],
    )  # fmt: skip
    assert list(base.admitted) == sorted(base.admitted)  # given order
    expected: list[int] = []
    pos = r["prefix"]
    for i in base.admitted:  # brute force: walk the chunks one by one
        expected += [pos + k for k in r["key_offsets"][i]]
        pos += r["sizes"][i]
    assert list(base.key_positions) == expected
    assert sum(base.key_counts) == len(expected)
    assert sum(r["sizes"][i] for i in base.admitted) <= max(
        0, r["budget"] - r["prefix"] - r["suffix"]
    )
