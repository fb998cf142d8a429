"""The statistics' scipy-backed tails against the hand-written oracle, and the tests built on them."""

from __future__ import annotations

import math

import numpy as np
import pytest

scipy_stats = pytest.importorskip("scipy.stats")

from phaseaware.calibration.stats import (  # noqa: E402
    cochran_q,
    dist,  # noqa: E402
    holm_adjust,
    mcnemar_vs_best,
)
from tests.support.dist_reference import (  # noqa: E402
    binom_logpmf,
    binom_two_sided_half,
    chi2_sf,
    log_factorials,
    regularized_gamma_q,
)


@pytest.mark.parametrize("df", [1, 2, 3, 4, 7, 15, 31, 100])
def test_chi2_sf_matches_scipy(df: int) -> None:
    for x in [0.0, 1e-6, 0.1, 0.5, 1.0, 2.5, df - 1.0, df, df + 1.0, 3.0 * df, 50.0, 200.0]:
        if x < 0:
            continue
        oracle = chi2_sf(x, df)
        ref = float(scipy_stats.chi2.sf(x, df))
        assert oracle == pytest.approx(ref, rel=1e-10, abs=1e-300), (x, df)
        assert dist.chi2_sf(x, df) == pytest.approx(oracle, rel=1e-10, abs=1e-300), (x, df)


def test_regularized_gamma_q_edges() -> None:
    assert regularized_gamma_q(2.0, 0.0) == 1.0
    assert regularized_gamma_q(2.0, math.inf) == 0.0
    with pytest.raises(ValueError):
        regularized_gamma_q(0.0, 1.0)
    with pytest.raises(ValueError):
        regularized_gamma_q(1.0, -1.0)
    # Q(1, x) = exp(-x) exactly.
    for x in [0.3, 1.7, 12.0]:
        assert regularized_gamma_q(1.0, x) == pytest.approx(math.exp(-x), rel=1e-13)


@pytest.mark.parametrize("n", [0, 1, 2, 5, 10, 11, 40, 200, 1500])
def test_binomial_two_sided_matches_scipy(n: int) -> None:
    for k in sorted({0, 1, n // 3, n // 2, n - 1, n} - {-1}):
        if not 0 <= k <= n:
            continue
        oracle = binom_two_sided_half(k, n)
        ref = 1.0 if n == 0 else float(scipy_stats.binomtest(k, n, 0.5).pvalue)
        assert oracle == pytest.approx(ref, rel=1e-9, abs=1e-300), (k, n)
        assert dist.binom_two_sided_half(k, n) == pytest.approx(oracle, rel=1e-9, abs=1e-300)


def test_binom_logpmf_matches_scipy() -> None:
    lf = log_factorials(300)
    k = np.arange(301)
    for p in [0.01, 0.3, 0.5, 0.97]:
        oracle = np.exp(binom_logpmf(k, 300, p, lf))
        ref = scipy_stats.binom.pmf(k, 300, p)
        np.testing.assert_allclose(oracle, ref, rtol=1e-8, atol=1e-300)
        np.testing.assert_allclose(dist.binom_pmf(k, 300, p), oracle, rtol=1e-8, atol=1e-300)


def _cochran_direct(x: np.ndarray) -> tuple[float, float]:
    """Textbook Cochran's Q, written independently of the library."""
    k = x.shape[1]
    col = x.sum(axis=0)
    row = x.sum(axis=1)
    n_total = x.sum()
    q = (k - 1) * (k * np.sum(col**2) - n_total**2) / (k * n_total - np.sum(row**2))
    return float(q), float(scipy_stats.chi2.sf(q, k - 1))


def test_cochran_q_matches_direct_computation() -> None:
    # Example from Sheskin-style textbooks: 12 subjects x 3 treatments.
    x = np.array(
        [
            [1, 1, 0],
            [1, 1, 1],
            [0, 0, 0],
            [1, 0, 0],
            [1, 1, 0],
            [1, 1, 0],
            [1, 1, 1],
            [1, 0, 0],
            [0, 1, 0],
            [1, 1, 0],
            [1, 0, 0],
            [1, 1, 0],
        ]
    )
    q, df, p = cochran_q(x)
    q_ref, p_ref = _cochran_direct(x.astype(float))
    assert df == 2
    assert q == pytest.approx(q_ref, rel=1e-12)
    assert p == pytest.approx(p_ref, rel=1e-10)
    rng = np.random.default_rng(7)
    for _ in range(20):
        x = (rng.random((30, 8)) < rng.uniform(0.2, 0.9, size=8)).astype(float)
        q, df, p = cochran_q(x)
        q_ref, p_ref = _cochran_direct(x)
        assert q == pytest.approx(q_ref, rel=1e-12)
        assert p == pytest.approx(p_ref, rel=1e-9, abs=1e-300)


def test_cochran_constant_rows_contribute_nothing() -> None:
    rng = np.random.default_rng(3)
    x = (rng.random((25, 6)) < 0.6).astype(float)
    padded = np.vstack([x, np.ones((10, 6)), np.zeros((7, 6))])
    assert cochran_q(padded).q == pytest.approx(cochran_q(x).q, rel=1e-12)


def test_cochran_degenerate_cases() -> None:
    assert tuple(cochran_q(np.ones((5, 4)))) == (0.0, 3, 1.0)
    assert tuple(cochran_q(np.zeros((5, 4)))) == (0.0, 3, 1.0)
    assert tuple(cochran_q(np.full((3, 4), np.nan))) == (0.0, 3, 1.0)
    assert tuple(cochran_q(np.ones((5, 1)))) == (0.0, 0, 1.0)


def test_cochran_uses_complete_rows_only() -> None:
    rng = np.random.default_rng(4)
    x = (rng.random((30, 4)) < 0.7).astype(float)
    with_missing = np.vstack([x, [[1, np.nan, 0, 0], [-1, 1, 1, 0]]])
    assert cochran_q(with_missing).q == pytest.approx(cochran_q(x).q, rel=1e-12)


def test_mcnemar_matches_binomtest_and_holm() -> None:
    rng = np.random.default_rng(11)
    acc = np.array([0.9, 0.7, 0.85, 0.5, 0.88])
    x = (rng.random((50, 5)) < acc).astype(float)
    results = mcnemar_vs_best(x)
    best = int(np.argmax(x.mean(axis=0)))
    assert [r.residue for r in results] == [r for r in range(5) if r != best]
    raw = []
    for res in results:
        b = int(np.sum((x[:, best] == 1) & (x[:, res.residue] == 0)))
        c = int(np.sum((x[:, best] == 0) & (x[:, res.residue] == 1)))
        assert (res.best_only, res.residue_only, res.best_residue) == (b, c, best)
        ref = 1.0 if b + c == 0 else float(scipy_stats.binomtest(b, b + c, 0.5).pvalue)
        assert res.p_value == pytest.approx(ref, rel=1e-9)
        raw.append(ref)
    # Holm by hand, over the family of all 5 * 4 / 2 = 10 residue pairs.
    m = 10
    order = np.argsort(raw)
    expected = np.empty(len(raw))
    running = 0.0
    for rank, i in enumerate(order):
        running = max(running, min(1.0, (m - rank) * raw[i]))
        expected[i] = running
    np.testing.assert_allclose([r.p_holm for r in results], expected, rtol=1e-12)


def test_holm_adjust_small_example() -> None:
    assert holm_adjust([0.01, 0.04, 0.03]) == pytest.approx([0.03, 0.06, 0.06])
    assert holm_adjust([]) == []
    assert holm_adjust([0.01, 0.04, 0.03], family_size=5) == pytest.approx([0.05, 0.12, 0.12])
    with pytest.raises(ValueError):
        holm_adjust([0.1, 0.2], family_size=1)


def _mcnemar_power_oracle(*, n: int, p_best: float, p_weak: float, alpha: float) -> float:
    """Exact McNemar power by direct enumeration with the hand-written tails."""
    p10, p01 = p_best * (1 - p_weak), (1 - p_best) * p_weak
    psi = p10 + p01
    share = p10 / psi
    lf = log_factorials(n)
    weight = np.exp(binom_logpmf(np.arange(n + 1), n, psi, lf))
    power = 0.0
    for m in range(1, n + 1):
        pmf = np.exp(binom_logpmf(np.arange(m + 1), m, share, lf))
        for b in range(m + 1):  # b: right at the best residue only
            if b > m - b and binom_two_sided_half(b, m) < alpha:
                power += weight[m] * pmf[b]
    return power


@pytest.mark.parametrize(
    ("n", "pb", "pw", "alpha"), [(40, 0.9, 0.6, 0.05), (120, 0.85, 0.75, 0.05 / 28)]
)
def test_mcnemar_power_matches_enumeration(n, pb, pw, alpha) -> None:
    from phaseaware.calibration.stats.plan import mcnemar_power

    ours = mcnemar_power(n=n, p_best=pb, p_weak=pw, alpha=alpha)
    assert ours == pytest.approx(
        _mcnemar_power_oracle(n=n, p_best=pb, p_weak=pw, alpha=alpha), abs=1e-9
    )


def test_statistics_without_scipy_name_the_extra(monkeypatch) -> None:
    import sys

    from phaseaware.errors import MissingExtraError

    monkeypatch.setitem(sys.modules, "scipy", None)
    monkeypatch.setitem(sys.modules, "scipy.stats", None)
    # the command that works from a clone (there is no `phaseaware[stats]` release)
    with pytest.raises(MissingExtraError, match=r"pip install -e '\.\[stats\]'"):
        dist.chi2_sf(3.0, 2)
