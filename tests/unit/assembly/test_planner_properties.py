"""Property tests of the pure planning pieces added for distance-aware padding and arrangements."""

from __future__ import annotations

import itertools

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from phaseaware.assembly.plan import planner
from phaseaware.assembly.plan.planner import PadTable

PERIOD = 8
LINEAR = PadTable(tuple(range(2 * PERIOD + 1)))

rel_tables = st.lists(st.floats(0.0, 1.0, allow_nan=False), min_size=PERIOD, max_size=PERIOD).map(
    tuple
)
chunks = st.lists(
    st.tuples(
        st.integers(1, 40),  # size in tokens
        st.lists(st.integers(0, 39), max_size=3),  # key offsets (clipped to the size)
        st.floats(0.0, 1.0, allow_nan=False),  # weight
    ),
    min_size=1,
    max_size=5,
)


def _layout(spec, order, start):
    keys, pos = [], start
    for i in order:
        size, offsets, _ = spec[i]
        keys.append(tuple(pos + t for t in sorted({o % size for o in offsets})))
        pos += size
    return keys


@settings(max_examples=150, deadline=None)
@given(spec=chunks, table=rel_tables, start=st.integers(0, 20), cost=st.floats(0.0, 0.05))
def test_order_scorer_equals_choose_pads_outside_any_window(spec, table, start, cost) -> None:
    score = planner.order_scorer(
        start=start,
        sizes=[s for s, _, _ in spec],
        key_offsets=[tuple(sorted({o % s for o in offs})) for s, offs, _ in spec],
        weights=[w for _, _, w in spec],
        residue_reliability=table,
        pad_tables=[LINEAR] * len(spec),
        pad_cost=cost,
    )

    def rel(t: int, d: int) -> float:
        return table[t % PERIOD]

    for order in itertools.islice(itertools.permutations(range(len(spec))), 6):
        keys = _layout(spec, order, start)
        weights = [spec[i][2] for i in order]
        kw = dict(key_positions=keys, weights=weights, length=10**6)
        pads = planner.choose_pads(
            period=PERIOD, reliability=rel, pad_tables=[LINEAR] * len(spec), pad_cost=cost,
            slack=10**6, **kw,
        )  # fmt: skip
        value = planner.pads_value(reliability=rel, shifts=list(pads), **kw)
        assert score(order) == pytest.approx(value - cost * sum(pads), abs=1e-9)


@settings(max_examples=100, deadline=None)
@given(values=st.lists(st.floats(-5, 5, allow_nan=False), min_size=1, max_size=6))
def test_search_orders_never_worse_than_the_given_order(values) -> None:
    order = tuple(range(len(values)))

    def evaluate(candidate: tuple[int, ...]) -> float:
        return sum(values[i] * (j + 1) for j, i in enumerate(candidate))

    best = planner.search_orders(order=order, evaluate=evaluate)
    assert sorted(best) == list(order) and best[-1] == order[-1]
    assert evaluate(best) >= evaluate(order)
    # exhaustive: nothing that keeps the last chunk beats it
    for perm in itertools.permutations(order[:-1]):
        assert evaluate((*perm, order[-1])) <= evaluate(best) + 1e-9


@settings(max_examples=100, deadline=None)
@given(
    spec=chunks.filter(lambda c: len(c) <= 3),
    table=rel_tables,
    cost=st.one_of(st.just(0.0), st.floats(0.0, 0.05)),
    window=st.one_of(st.none(), st.integers(1, 30)),
    inside=st.floats(0.0, 1.0, allow_nan=False),
    tail=st.integers(0, 6),
)
def test_choose_pads_is_optimal_where_the_docstring_says(
    spec, table, cost, window, inside, tail
) -> None:
    """Free padding outside any window: the greedy finds the best padding (brute force).

    So does a single chunk, whatever the window and cost. With a cost per pad token
    and several chunks it is a heuristic (it does not trade an earlier pad for a
    cheaper later one), so only the single-chunk and free cases are exact.
    """
    keys = _layout(spec, range(len(spec)), 3)
    length = 3 + sum(s for s, _, _ in spec) + 12
    weights = [w for _, _, w in spec]

    def rel(t: int, d: int) -> float:
        return inside if window is not None and d <= window else table[t % PERIOD]

    kw = dict(key_positions=keys, weights=weights, reliability=rel, length=length, tail=tail)
    pads = planner.choose_pads(
        period=PERIOD, pad_tables=[LINEAR] * len(spec), pad_cost=cost, slack=100,
        window=window, **kw,
    )  # fmt: skip

    def value(shifts) -> float:
        return planner.pads_value(shifts=list(shifts), **kw) - cost * sum(shifts)

    best = max(value(c) for c in itertools.product(range(PERIOD), repeat=len(spec)))
    if len(spec) == 1 or (cost == 0.0 and window is None):
        assert value(pads) == pytest.approx(best, abs=1e-9)
    assert value(pads) <= best + 1e-9
