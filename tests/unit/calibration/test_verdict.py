"""The verdict printed by calibrate and compare, from counts by residue."""

from __future__ import annotations

import numpy as np
import pytest

from phaseaware.calibration.verdict import homogeneity_p_value, phase_verdict
from phaseaware.errors import InputError

scipy_stats = pytest.importorskip("scipy.stats")


def test_reference_like_counts_are_phase_sensitive_with_the_expected_gain() -> None:
    n = [40] * 8
    successes = [38, 40, 40, 40, 39, 37, 18, 18]  # the reference model's shape
    v = phase_verdict(successes=successes, n=n, period=8)
    assert v.phase_sensitive and v.p_value < 1e-6
    assert (v.worst_residue, v.best_residue) == (6, 1)
    assert set(v.good_residues) == {0, 1, 2, 3, 4, 5}
    typical = np.mean(np.array(successes) / 40)
    assert v.typical_accuracy == pytest.approx(typical)
    assert v.phase_aware_accuracy == pytest.approx(np.mean(np.array(successes[:6]) / 40))
    assert v.expected_gain == pytest.approx(v.phase_aware_accuracy - typical)
    text = v.text()
    assert text.startswith("verdict: phase-sensitive")
    assert "worst residue 6" in text and "good residues 0-5" in text
    assert "total-length residues: not measured" in text


def test_flat_counts_are_not_phase_sensitive_and_promise_nothing() -> None:
    v = phase_verdict(successes=[34, 36, 35, 33], n=[40] * 4, period=4)
    assert not v.phase_sensitive and v.expected_gain == 0.0
    assert "not phase-sensitive" in v.text() and "expected gain" not in v.text()


def test_length_residues_are_judged_on_their_own_counts() -> None:
    v = phase_verdict(
        successes=[36] * 4,
        n=[40] * 4,
        period=4,
        length_successes=[39, 39, 10, 39],
        length_n=[40] * 4,
    )
    assert v.length is not None and v.length.matters and v.length.worst_residue == 2
    assert "total-length residues matter" in v.text()
    flat = phase_verdict(
        successes=[36] * 4, n=[40] * 4, period=4, length_successes=[36] * 4, length_n=[40] * 4
    )
    assert flat.length is not None and not flat.length.matters


def test_homogeneity_matches_scipy_chi2_contingency() -> None:
    rng = np.random.default_rng(0)
    for _ in range(10):
        n = rng.integers(20, 80, size=6)
        s = rng.binomial(n, 0.7)
        table = np.vstack([s, n - s])
        ref = scipy_stats.chi2_contingency(table, correction=False).pvalue
        assert homogeneity_p_value(s.tolist(), n.tolist()) == pytest.approx(ref, rel=1e-9)
    assert homogeneity_p_value([5, 5], [5, 5]) == 1.0


def test_caller_test_overrides_and_bad_counts_are_refused() -> None:
    v = phase_verdict(successes=[9, 1], n=[10, 10], period=2, p_value=0.2, test="mine")
    assert not v.phase_sensitive and v.test == "mine"
    assert v.to_dict()["good_residues"] == list(v.good_residues)
    for bad in (
        {"successes": [3], "n": [2], "period": 1},
        {"successes": [3, 1], "n": [2, 2], "period": 2},
    ):
        with pytest.raises(InputError):
            phase_verdict(**bad)
    with pytest.raises(InputError):
        phase_verdict(successes=[1, 1, 1], n=[2, 2, 2], period=2)
