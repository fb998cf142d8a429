"""Terminal bar chart: layout, scaling, intervals and input checks."""

from __future__ import annotations

import pytest

from phaseaware.charts import LEGEND, bar_chart


def bar_of(line: str) -> str:
    return line.split("│")[1]


def test_solid_bars_scale_to_fractions() -> None:
    text = bar_chart(["r=0", "r=10"], [0.5, 1.0], width=10)
    first, second = text.splitlines()
    assert first.startswith(" r=0 │") and second.startswith("r=10 │")
    assert bar_of(first) == "█████     "
    assert bar_of(second) == "█" * 10
    assert first.endswith("50.0%") and second.endswith("100.0%")
    assert not text.endswith("\n")


def test_partial_cells_use_eighth_blocks() -> None:
    assert bar_of(bar_chart(["a"], [0.0625], width=2)) == "▏ "  # 1/8 of a cell
    assert bar_of(bar_chart(["a"], [0.5], width=1)) == "▌"
    assert bar_of(bar_chart(["a"], [0.6875], width=2)) == "█▍"  # 1 cell + 3/8
    assert bar_of(bar_chart(["a"], [0.0], width=3)) == "   "


def test_values_clamped_and_widths_equal() -> None:
    lines = bar_chart(["a", "b", "c"], [1.5, -0.2, 0.33], width=12).splitlines()
    assert len({len(bar_of(line)) for line in lines}) == 1
    assert bar_of(lines[0]) == "█" * 12 and bar_of(lines[1]) == " " * 12


def test_interval_shading_and_legend() -> None:
    text = bar_chart(["r=0"], [0.5], lows=[0.3], highs=[0.7], width=10)
    line, legend = text.splitlines()
    assert bar_of(line) == "███▓▓░░   "
    assert line.endswith("50.0%  [30.0%, 70.0%]")
    assert legend.strip() == LEGEND


def test_unknown_values_and_bounds() -> None:
    text = bar_chart(["a", "b"], [None, 0.5], lows=[None, None], highs=[None, None], width=4)
    first, second = text.splitlines()[:2]
    assert first.endswith("n/a") and bar_of(first) == "    "
    assert "[" not in second


def test_other_units_scale_to_max() -> None:
    lines = bar_chart(["x", "y"], [5, 10], unit=" tok", width=10).splitlines()
    assert bar_of(lines[0]) == "█████     " and lines[0].endswith("5 tok")
    assert bar_of(lines[1]) == "█" * 10


def test_empty_chart() -> None:
    assert bar_chart([], []) == ""


@pytest.mark.parametrize(
    ("kwargs", "fragment"),
    [
        ({"values": [0.1]}, "values has 1 entries but there are 2 labels"),
        ({"values": [0.1, 0.2], "lows": [0.1]}, "lows has 1 entries"),
        ({"values": [0.1, float("nan")]}, "non-finite"),
        ({"values": [0.1, 0.2], "width": 0}, "width must be >= 1"),
    ],
)
def test_bad_input(kwargs: dict, fragment: str) -> None:
    with pytest.raises(ValueError, match=fragment):
        bar_chart(["a", "b"], **kwargs)
