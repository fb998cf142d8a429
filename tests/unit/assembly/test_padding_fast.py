"""The fast ``choose_pads`` (residue matrix, choice tables) chooses what the per-key scan did.

``tests/support/padding_reference.py`` is the scan as it was before the speed-up; both are
run on the same inputs, drawn to hit the fast path's edges: keys near and far from the end
(``window``), slack below the largest pad (and below the tables' need), shared and distinct pad tables, zero weights,
chunks without keys, ties (repeated reliabilities) and pad costs of zero.
"""

from __future__ import annotations

from unittest import mock

from hypothesis import example, given, settings
from hypothesis import strategies as st

from phaseaware.assembly.plan import pad_prefix, planner
from phaseaware.assembly.plan.planner import PadTable
from tests.support.padding_reference import reference_choose_pads


@st.composite
def pad_problems(draw: st.DrawFn) -> dict[str, object]:
    period = draw(st.sampled_from([2, 4, 8, 16, 64]))  # 64: no choice tables, rows only
    n = draw(st.integers(1, 12))
    levels = draw(st.lists(st.sampled_from([0.3, 0.5, 0.7, 0.9]), min_size=period, max_size=period))
    values = tuple(levels)
    window = draw(st.one_of(st.none(), st.integers(0, 60)))
    inside = draw(st.sampled_from([0.5, 0.95, 1.0]))
    tables = [
        PadTable(tuple(range(2 * period + 1))),
        PadTable(tuple(sorted({draw(st.integers(0, 3 * period)) for _ in range(period)} | {0}))),
        PadTable((0,)),
    ]
    keys, weights, pad_tables, pos = [], [], [], draw(st.integers(0, 10))
    for _ in range(n):
        size = draw(st.integers(1, 30))
        offsets = draw(st.lists(st.integers(0, size - 1), max_size=5, unique=True))
        keys.append(tuple(pos + o for o in sorted(offsets)))
        weights.append(draw(st.sampled_from([0.0, 0.25, 0.5, 1.0, 1 / 3])))
        pad_tables.append(tables[draw(st.integers(0, 2))])
        pos += size
    tail = draw(st.integers(0, 5))

    def reliability(t: int, d: int) -> float:
        if window is not None and d <= window:
            return inside
        return values[t % period]

    return dict(
        key_positions=keys, weights=weights, period=period, reliability=reliability,
        pad_tables=pad_tables, pad_cost=draw(st.sampled_from([0.0, 0.001, 0.01])),
        slack=draw(st.integers(0, 4 * period * n)), length=pos + draw(st.integers(0, 80)),
        tail=tail, window=window, residue_values=values,
    )  # fmt: skip


@settings(max_examples=2000, deadline=None)
@given(problem=pad_problems())
@example(
    problem=dict(
        key_positions=[(3,), (9, 12)],
        weights=[1.0, 0.5],
        period=4,
        reliability=lambda t, d: (0.5, 0.9, 0.5, 0.9)[t % 4],
        pad_tables=[PadTable((0, 1, 2, 3))] * 2,
        pad_cost=0.0,
        slack=1,
        length=20,
        tail=0,
        window=None,
        residue_values=(0.5, 0.9, 0.5, 0.9),
    )  # fmt: skip
)
def test_fast_choose_pads_equals_the_reference_scan(problem: dict[str, object]) -> None:
    expected = reference_choose_pads(**problem)  # type: ignore[arg-type]
    assert planner.choose_pads(**problem) == expected  # type: ignore[arg-type]
    with mock.patch.object(pad_prefix, "FAST_FROM", 1):  # tabulate even short prefixes
        assert planner.choose_pads(**problem) == expected  # type: ignore[arg-type]


@settings(max_examples=300, deadline=None)
@given(problem=pad_problems())
def test_without_residue_values_the_scan_is_used(problem: dict[str, object]) -> None:
    problem = {**problem, "residue_values": None}
    assert planner.choose_pads(**problem) == reference_choose_pads(**problem)  # type: ignore[arg-type]
