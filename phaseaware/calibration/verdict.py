"""A verdict a user can act on, from accuracy counts by residue.

``calibrate`` and ``score`` end with the same few lines (``compare`` judges from
its own paired tests instead: :mod:`phaseaware.compare.verdict`): is the
model phase-sensitive at the test's level, which residues are worst and best,
what phase-aware assembly should gain for a typical prompt, and whether the
total prompt length's residue matters too. :func:`phase_verdict` builds them
from plain counts (``successes[r]`` of ``n[r]`` probes with the key at residue
``r``), so any caller that can count can print it.

* Phase dependence: the caller's test when it has a better one (a paired test
  such as Cochran's Q: ``p_value`` and ``test``); otherwise Pearson's chi-square
  test of homogeneity of the residues' accuracies (``scipy.stats``).
* Expected gain for a typical prompt: a prompt assembled without regard to phase
  puts its key on any residue alike, so it scores the mean over residues;
  phase-aware assembly moves keys onto good residues (accuracy at least the
  mean, and a 95% interval that reaches the best residue's lower bound), so it
  scores about their mean. The gain is the difference, in percentage points; it
  is reported as 0 when the test finds no phase effect.
* Total-length residues (optional counts by ``prompt length mod period``): they
  matter when their own homogeneity test rejects at ``alpha``.
* A detected period (``--period auto``, :func:`auto_period_test`): the verdict's
  test is the detection together with the residue test at that period (both must
  reject; the p-value is the larger). When no period is detected, nothing is
  tested at the best candidate: the verdict says "no period detected" and shows
  the candidate's residues as untested.

Accuracies are fractions (0..1); gains are printed in percentage points.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import asdict, dataclass

import numpy as np

from phaseaware.calibration.stats.dist import chi2_sf
from phaseaware.calibration.stats.period import TEST as PERIOD_TEST
from phaseaware.calibration.stats.period import PeriodDetection
from phaseaware.errors import InputError
from phaseaware.intervals import wilson_interval

__all__ = [
    "LengthVerdict",
    "Verdict",
    "auto_period_test",
    "homogeneity_p_value",
    "phase_verdict",
]

PEARSON = "Pearson chi-square test of equal accuracy across residues"


@dataclass(frozen=True)
class LengthVerdict:
    """Whether the total prompt length's residue matters (``p_value < alpha``)."""

    matters: bool
    p_value: float
    worst_residue: int
    worst_accuracy: float
    best_residue: int
    best_accuracy: float


@dataclass(frozen=True)
class Verdict:
    """The verdict of one measurement (see the module docstring). Accuracies are fractions;
    ``expected_gain`` = ``phase_aware_accuracy - typical_accuracy`` (0 when not
    ``phase_sensitive``); ``good_residues``: those within noise of the best."""

    period: int
    phase_sensitive: bool
    p_value: float
    test: str
    alpha: float
    worst_residue: int
    worst_accuracy: float
    best_residue: int
    best_accuracy: float
    good_residues: tuple[int, ...]
    typical_accuracy: float
    phase_aware_accuracy: float
    expected_gain: float
    length: LengthVerdict | None
    #: ``None``: the period was given; else how ``--period auto`` found it
    #: (``period_detected`` False: none was, ``period`` is the untested best candidate)
    period_note: str | None = None
    period_detected: bool | None = None

    def to_dict(self) -> dict[str, object]:
        """JSON-safe: plain numbers, lists and strings."""
        doc = asdict(self)
        doc["good_residues"] = list(self.good_residues)
        return doc

    def lines(self) -> list[str]:
        """The verdict as a few lines of text, first line the answer."""
        p = _format_p(self.p_value)
        if self.period_detected is False:
            return [
                f"verdict: no period detected at alpha {self.alpha:g} ({p}, {self.test}): "
                "not phase-sensitive; phase-aware assembly is not expected to help",
                f"  residues shown at the best candidate, period {self.period} "
                f"({self.period_note}): worst {self.worst_residue} "
                f"({_pct(self.worst_accuracy)}), best {self.best_residue} "
                f"({_pct(self.best_accuracy)}), untested",
                "  total-length residues: not tested (no period)",
            ]
        if self.phase_sensitive:
            head = f"verdict: phase-sensitive at alpha {self.alpha:g} ({p}, {self.test})"
        else:
            head = (
                f"verdict: not phase-sensitive at alpha {self.alpha:g} ({p}, {self.test}); "
                "phase-aware assembly is not expected to help"
            )
        period = f"period {self.period}" + (f" ({self.period_note})" if self.period_note else "")
        lines = [
            head,
            f"  worst residue {self.worst_residue} ({_pct(self.worst_accuracy)}), "
            f"best residue {self.best_residue} ({_pct(self.best_accuracy)}), "
            f"{period}",
        ]
        if self.phase_sensitive:
            good = _ranges(self.good_residues)
            lines.append(
                f"  expected gain from phase-aware assembly: {100 * self.expected_gain:+.1f} "
                f"points for a typical prompt ({_pct(self.typical_accuracy)} with the key on "
                f"any residue, {_pct(self.phase_aware_accuracy)} on the good residues {good})"
            )
        length = self.length
        if length is None:
            lines.append("  total-length residues: not measured")
        elif length.matters:
            lines.append(
                f"  total-length residues matter ({_format_p(length.p_value)}): worst "
                f"{length.worst_residue} ({_pct(length.worst_accuracy)}), best "
                f"{length.best_residue} ({_pct(length.best_accuracy)}); keep length padding on"
            )
        else:
            lines.append(
                f"  total-length residues: no significant effect ({_format_p(length.p_value)})"
            )
        return lines

    def text(self) -> str:
        return "\n".join(self.lines())


def _pct(value: float) -> str:
    return f"{100 * value:.1f}%"


def _format_p(p: float) -> str:
    return "p < 0.001" if p < 0.001 else f"p = {p:.2g}"


def _ranges(residues: Sequence[int]) -> str:
    """``(0, 1, 2, 5)`` -> ``"0-2, 5"``."""
    values, parts, i = list(residues), [], 0
    while i < len(values):
        j = i
        while j + 1 < len(values) and values[j + 1] == values[j] + 1:
            j += 1
        parts.append(str(values[i]) if i == j else f"{values[i]}-{values[j]}")
        i = j + 1
    return ", ".join(parts)


def _counts(
    successes: Sequence[int] | np.ndarray, n: Sequence[int] | np.ndarray, what: str
) -> tuple[np.ndarray, np.ndarray]:
    s = np.asarray(successes, dtype=np.int64)
    k = np.asarray(n, dtype=np.int64)
    if s.ndim != 1 or s.shape != k.shape or s.size < 2:
        raise InputError(
            f"{what}: successes and n must be equal-length lists, one per residue (at least 2)"
        )
    if (k < 0).any() or (s < 0).any() or (s > k).any():
        raise InputError(f"{what}: need 0 <= successes <= n for every residue")
    if not (k > 0).sum() >= 2:
        raise InputError(f"{what}: at least two residues need a measured probe")
    return s, k


def auto_period_test(
    detection: PeriodDetection,
    *,
    residue_p: float | None = None,
    residue_test: str | None = None,
) -> tuple[float, str, str]:
    """``(p_value, test, period_note)`` of a verdict whose period ``--period auto`` chose.

    A detected period: the larger of the detection's Holm-adjusted p-value and the
    residue test's at that period (``residue_p``), so the verdict rejects only when both
    printed tests do; the same for a period the residue test did not confirm
    (``detection.note``). None detected: the best candidate's adjusted p-value (>= alpha),
    nothing tested at the candidate.
    """
    top = max(detection.p_values, default=detection.candidate)
    held = f"Holm-adjusted {_format_p(detection.p_value)}"
    if detection.period is None and not (detection.note and residue_p is not None):
        return (
            detection.p_value,
            f"period detection over candidates 2-{top}: {PERIOD_TEST}",
            detection.note or f"not significant, {held}",
        )
    if residue_p is None or residue_test is None:
        raise InputError("a detected period's verdict needs the residue test at that period")
    period = detection.period or detection.candidate
    return (
        max(detection.p_value, residue_p),
        f"period detection over candidates 2-{top} and {residue_test} at period {period}",
        detection.note or f"detected, {held}",
    )


def homogeneity_p_value(
    successes: Sequence[int] | np.ndarray, n: Sequence[int] | np.ndarray
) -> float:
    """Pearson chi-square p-value of "every residue has the same accuracy" (unmeasured
    residues left out); 1 when every measured probe agrees (all right or all wrong)."""
    s, k = _counts(successes, n, "homogeneity test")
    s, k = s[k > 0], k[k > 0]
    pooled = s.sum() / k.sum()
    if pooled in (0.0, 1.0):
        return 1.0
    expected = k * pooled
    stat = float(np.sum((s - expected) ** 2 / (expected * (1 - pooled))))
    return chi2_sf(stat, s.size - 1)


def _extremes(s: np.ndarray, k: np.ndarray) -> tuple[np.ndarray, int, int]:
    measured = np.flatnonzero(k > 0)
    acc = np.full(s.size, math.nan)
    acc[measured] = s[measured] / k[measured]
    worst = int(measured[np.argmin(acc[measured])])
    best = int(measured[np.argmax(acc[measured])])
    return acc, worst, best


def phase_verdict(
    *,
    successes: Sequence[int],
    n: Sequence[int],
    period: int,
    length_successes: Sequence[int] | None = None,
    length_n: Sequence[int] | None = None,
    alpha: float = 0.05,
    p_value: float | None = None,
    test: str | None = None,
    period_note: str | None = None,
    period_detected: bool | None = None,
) -> Verdict:
    """The verdict from counts by key residue (and optionally by total-length residue).

    ``successes[r]`` correct of ``n[r]`` with the key at residue ``r`` (``period``
    entries). ``p_value``/``test``: the caller's own test of phase dependence (else
    Pearson's chi-square on the counts). ``period_note``/``period_detected``: how
    ``--period auto`` chose the period (:func:`auto_period_test`); with
    ``period_detected=False`` the verdict is "no period detected" whatever
    ``p_value`` says. Raises ``InputError`` for bad counts.
    """
    if not 0 < alpha < 1:
        raise InputError(f"alpha must be a fraction in (0, 1), got {alpha}")
    s, k = _counts(successes, n, "key residues")
    if s.size != period:
        raise InputError(f"got counts for {s.size} residues, period is {period}")
    if p_value is None:
        p_value, test = homogeneity_p_value(s, k), PEARSON
    acc, worst, best = _extremes(s, k)
    measured = np.flatnonzero(k > 0)
    best_low = wilson_interval(int(s[best]), int(k[best]))[0]
    # a mean lies between the extremes; rounding must not put it outside them
    typical = min(max(float(np.mean(acc[measured])), float(acc[worst])), float(acc[best]))
    good = tuple(
        int(r)
        for r in measured
        if wilson_interval(int(s[r]), int(k[r]))[1] >= best_low and acc[r] >= typical
    )
    sensitive = p_value < alpha and period_detected is not False
    aware = min(float(np.mean(acc[list(good)])), float(acc[best])) if sensitive else typical
    length = None
    if length_successes is not None and length_n is not None:
        ls, lk = _counts(length_successes, length_n, "total-length residues")
        lp = homogeneity_p_value(ls, lk)
        lacc, lworst, lbest = _extremes(ls, lk)
        length = LengthVerdict(
            matters=lp < alpha,
            p_value=lp,
            worst_residue=lworst,
            worst_accuracy=float(lacc[lworst]),
            best_residue=lbest,
            best_accuracy=float(lacc[lbest]),
        )
    return Verdict(
        period=period,
        phase_sensitive=sensitive,
        p_value=float(p_value),
        test=test or "the caller's test",
        alpha=alpha,
        worst_residue=worst,
        worst_accuracy=float(acc[worst]),
        best_residue=best,
        best_accuracy=float(acc[best]),
        good_residues=good,
        typical_accuracy=typical,
        phase_aware_accuracy=aware,
        expected_gain=aware - typical,
        length=length,
        period_note=period_note,
        period_detected=period_detected,
    )
