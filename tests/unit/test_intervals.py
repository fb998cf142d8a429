"""Wilson score interval: known values, a direct formula, scipy, and properties."""

from __future__ import annotations

import math

import pytest
from hypothesis import given
from hypothesis import strategies as st

from phaseaware.intervals import Z_95, wilson_interval


def direct_wilson(k: int, n: int, z: float = Z_95) -> tuple[float, float]:
    """Textbook form: (p + z²/2n ± z·sqrt(p(1-p)/n + z²/4n²)) / (1 + z²/n)."""
    p = k / n
    center = p + z * z / (2 * n)
    spread = z * math.sqrt(p * (1 - p) / n + z * z / (4 * n * n))
    denom = 1 + z * z / n
    return (center - spread) / denom, (center + spread) / denom


@pytest.mark.parametrize(
    ("k", "n", "low", "high"),
    [
        (206, 256, 0.751770, 0.848596),  # DeepSeek-V4-Flash-0731 r=0 (80.5%)
        (76, 256, 0.244245, 0.355511),  # DeepSeek-V4-Flash-Base worst residue (29.7%)
        (179, 256, 0.640435, 0.752112),  # DeepSeek-V4-Flash-Base best residue (69.9%)
        (5, 10, 0.236593, 0.763407),
    ],
)
def test_known_values(k: int, n: int, low: float, high: float) -> None:
    got = wilson_interval(k, n)
    assert got == pytest.approx((low, high), abs=1e-6)


@pytest.mark.parametrize(("k", "n"), [(1, 1), (3, 7), (112, 256), (2432, 2560), (0, 5), (5, 5)])
def test_matches_direct_formula(k: int, n: int) -> None:
    low, high = direct_wilson(k, n)
    got = wilson_interval(k, n)
    assert got == pytest.approx((max(low, 0.0), min(high, 1.0)), abs=1e-12)


@pytest.mark.parametrize(("k", "n"), [(0, 1), (1, 3), (112, 256), (255, 256), (2297, 2560)])
def test_matches_scipy(k: int, n: int) -> None:
    stats = pytest.importorskip("scipy.stats")
    ci = stats.binomtest(k, n).proportion_ci(confidence_level=0.95, method="wilson")
    assert wilson_interval(k, n) == pytest.approx((ci.low, ci.high), abs=1e-9)


def test_edges_are_exact() -> None:
    assert wilson_interval(0, 0) == (0.0, 1.0)
    assert wilson_interval(0, 37)[0] == 0.0
    assert wilson_interval(37, 37)[1] == 1.0
    assert wilson_interval(3, 10, z=0.0) == (0.3, 0.3)


@pytest.mark.parametrize(
    ("args", "kwargs"),
    [
        ((-1, 5), {}),
        ((6, 5), {}),
        ((1, -1), {}),
        ((1.5, 5), {}),
        ((True, 5), {}),
        ((1, 5), {"z": float("nan")}),
        ((1, 5), {"z": -1.0}),
    ],
)
def test_rejects_bad_input(args: tuple, kwargs: dict) -> None:
    with pytest.raises(ValueError):
        wilson_interval(*args, **kwargs)


@given(
    st.integers(min_value=1, max_value=100_000).flatmap(
        lambda n: st.tuples(st.integers(min_value=0, max_value=n), st.just(n))
    )
)
def test_interval_contains_estimate_and_is_a_probability(kn: tuple[int, int]) -> None:
    k, n = kn
    low, high = wilson_interval(k, n)
    assert 0.0 <= low <= k / n <= high <= 1.0


@given(st.integers(min_value=1, max_value=5000), st.data())
def test_wider_with_larger_z(n: int, data: st.DataObject) -> None:
    k = data.draw(st.integers(min_value=0, max_value=n))
    low95, high95 = wilson_interval(k, n)
    low99, high99 = wilson_interval(k, n, z=2.5758293035489)
    assert low99 <= low95 + 1e-15 and high95 <= high99 + 1e-15
