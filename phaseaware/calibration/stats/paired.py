"""Paired tests: Cochran's Q and exact McNemar against the best residue (over base
prompts), and exact McNemar between two arrangements (over questions).

The residue tests use complete rows only (a pair needs both outcomes from the same
base prompt). p-values come from ``scipy.stats`` (through :mod:`.dist`, imported on
first use).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, NamedTuple

import numpy as np

from phaseaware.calibration.stats.dist import binom_two_sided_half, chi2_sf
from phaseaware.calibration.stats.outcomes import as_outcomes, complete_rows
from phaseaware.errors import InputError

__all__ = [
    "CochranResult",
    "McNemarResult",
    "PairedOutcomes",
    "cochran_q",
    "holm_adjust",
    "mcnemar_vs_best",
    "paired_mcnemar",
    "weak_residues",
]


class CochranResult(NamedTuple):
    """Cochran's Q test of "accuracy does not depend on the residue"."""

    q: float
    df: int
    p_value: float


def cochran_q(outcomes: Any) -> CochranResult:
    """Cochran's Q over complete rows; ``df = P - 1``; p from the chi-square tail.

    Rows that are all 0 or all 1 carry no information and do not change Q.
    Degenerate cases (no complete row, every row constant, or ``P < 2``) give
    ``Q = 0, p = 1``.
    """
    arr = complete_rows(as_outcomes(outcomes))
    k = arr.shape[1]
    df = k - 1
    if k < 2 or arr.shape[0] == 0:
        return CochranResult(0.0, df, 1.0)
    col = arr.sum(axis=0)
    row = arr.sum(axis=1)
    total = float(col.sum())
    denom = k * total - float(np.sum(row**2))
    if denom <= 0:
        return CochranResult(0.0, df, 1.0)
    q = (k - 1) * (k * float(np.sum(col**2)) - total**2) / denom
    q = max(0.0, q)
    return CochranResult(q, df, chi2_sf(q, df))


@dataclass(frozen=True)
class McNemarResult:
    """Exact McNemar test of ``residue`` against ``best_residue`` over complete rows.

    ``best_only`` counts rows right at the best residue and wrong at this one,
    ``residue_only`` the reverse; accuracies are over complete rows (fractions).
    ``p_value`` is the exact two-sided binomial p-value, ``p_holm`` the
    Holm-corrected one over the family of all ``P(P-1)/2`` residue pairs (see
    ``mcnemar_vs_best`` for why all pairs).
    """

    residue: int
    best_residue: int
    n_pairs: int
    best_only: int
    residue_only: int
    accuracy: float
    best_accuracy: float
    p_value: float
    p_holm: float


def holm_adjust(p_values: list[float], *, family_size: int | None = None) -> list[float]:
    """Holm step-down adjusted p-values, in the input order.

    ``family_size`` (default ``len(p_values)``) may be larger than the number of
    p-values given: that is Holm over a larger family whose other members'
    p-values are taken as 1, which is valid whatever those members are.
    """
    m = len(p_values) if family_size is None else family_size
    if m < len(p_values):
        raise ValueError(f"family_size {m} is smaller than the {len(p_values)} p-values given")
    order = sorted(range(len(p_values)), key=lambda i: p_values[i])
    adjusted = [1.0] * len(p_values)
    running = 0.0
    for rank, i in enumerate(order):
        running = max(running, min(1.0, (m - rank) * p_values[i]))
        adjusted[i] = running
    return adjusted


def mcnemar_vs_best(outcomes: Any) -> tuple[McNemarResult, ...]:
    """Test every residue against the best one (exact McNemar, Holm-corrected).

    Uses complete rows only; the best residue is the one with the highest
    accuracy on those rows (lowest residue on ties), so it is not in the result
    (``P - 1`` entries, in residue order). With no complete row every p-value is 1.

    Selection of the best: the reference is chosen *by the data* (the empirical
    maximum), so "r vs best" is really the most extreme of all pairwise
    comparisons; correcting for only ``P - 1`` tests lets flat profiles through
    far too often (simulated: 9% at 8 residues x 200 prompts, 12% at 16 x 60,
    for a nominal 5%). Holm is therefore applied over the family of all
    ``P(P-1)/2`` pairs, the untested pairs counting as p = 1; this controls the
    family-wise error rate over the pairwise nulls whichever residue wins.
    """
    arr = complete_rows(as_outcomes(outcomes))
    k = arr.shape[1]
    rows = arr.shape[0]
    acc = arr.mean(axis=0) if rows else np.zeros(k)
    best = int(np.argmax(acc))
    raw = []
    for r in range(k):
        if r == best:
            continue
        b = int(np.sum((arr[:, best] == 1) & (arr[:, r] == 0)))
        c = int(np.sum((arr[:, best] == 0) & (arr[:, r] == 1)))
        raw.append((r, b, c, binom_two_sided_half(b, b + c)))
    holm = holm_adjust([p for *_, p in raw], family_size=max(1, k * (k - 1) // 2))
    return tuple(
        McNemarResult(
            residue=r,
            best_residue=best,
            n_pairs=rows,
            best_only=b,
            residue_only=c,
            accuracy=float(acc[r]),
            best_accuracy=float(acc[best]),
            p_value=p,
            p_holm=adj,
        )
        for (r, b, c, p), adj in zip(raw, holm, strict=True)
    )


def weak_residues(results: tuple[McNemarResult, ...], *, alpha: float = 0.05) -> tuple[int, ...]:
    """Residues significantly worse than the best: Holm-corrected p < ``alpha``."""
    if not 0 < alpha < 1:
        raise InputError(f"alpha must be a fraction in (0, 1), got {alpha}")
    return tuple(
        res.residue for res in results if res.p_holm < alpha and res.best_only > res.residue_only
    )


@dataclass(frozen=True)
class PairedOutcomes:
    """``first`` against ``second`` on the same items: ``wins`` (right only with ``first``),
    ``losses`` (right only with ``second``), the concordant counts, and the exact McNemar
    p-value (two-sided binomial test of wins against losses at 1/2)."""

    wins: int
    losses: int
    both_right: int
    both_wrong: int
    p_value: float

    @property
    def n(self) -> int:
        return self.wins + self.losses + self.both_right + self.both_wrong

    @property
    def difference(self) -> float:
        """Accuracy of ``first`` minus that of ``second`` (a fraction; 0 with no item)."""
        return (self.wins - self.losses) / self.n if self.n else 0.0

    def better(self, alpha: float) -> bool:
        """``first`` is right more often, significantly at ``alpha``."""
        return self.p_value < alpha and self.wins > self.losses

    def worse(self, alpha: float) -> bool:
        """``second`` is right more often, significantly at ``alpha``."""
        return self.p_value < alpha and self.losses > self.wins


def paired_mcnemar(first: Sequence[bool], second: Sequence[bool]) -> PairedOutcomes:
    """Exact McNemar test of two arrangements graded on the same items, in the same order."""
    if len(first) != len(second):
        raise InputError(
            f"paired outcomes need one grade per item from each side ({len(first)} vs "
            f"{len(second)})"
        )
    pairs = list(zip(first, second, strict=True))
    wins = sum(bool(a) and not b for a, b in pairs)
    losses = sum(bool(b) and not a for a, b in pairs)
    return PairedOutcomes(
        wins=wins,
        losses=losses,
        both_right=sum(bool(a) and bool(b) for a, b in pairs),
        both_wrong=sum(not a and not b for a, b in pairs),
        p_value=binom_two_sided_half(wins, wins + losses),
    )
