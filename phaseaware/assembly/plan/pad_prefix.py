"""The far prefix of a pad search, tabulated: ``padding.choose_pads``'s fast path.

In ``choose_pads`` a chunk whose keys all lie farther than ``window`` from the
end is scored by residue alone: with ``values[r]`` the residue reliabilities,
option ``(k, shift)`` after a cumulative shift ``C`` is worth

    per_key * V[j, (C + shift) % period] - pad_cost * shift,
    V[j, m] = Σ_t values[(t + m) % period]   (t over chunk j's keys, in order),

and no earlier key is near the end to be re-scored (positions grow along the
order, so such chunks form a prefix). Its choice therefore depends on ``C``
only through ``b = C % period``, as long as no option is skipped for want of
slack. ``tabulate`` computes ``V`` for the whole prefix at once (one gather,
one ``np.add.reduceat``) and, per distinct option list, the scan's choice for
every ``b`` at once (periods up to 32; longer ones keep the scan, ``scan``):
the same floats (``per_key * V - pad_cost * shift``, IEEE operations
elementwise) compared by the same rule (an option replaces the best only when
more than 1e-12 better, in option order). ``V``'s sums may differ from a
per-key sum in the last bit; a choice could then differ only where two
options lie within rounding of exactly 1e-12 apart
(``tests/unit/assembly/test_padding_fast.py`` compares with the per-key scan).
Walking the prefix is then one table lookup per chunk (``walk``).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

__all__ = ["FarPrefix", "tabulate", "FAST_FROM"]

# Prefixes shorter than this take the plain scan: numpy's fixed costs (~0.1 ms) exceed it.
FAST_FROM = 24
_TABLE_PERIOD = 32  # longer periods: rows only (a table costs O(period) per option and chunk)
_TABLE_CELLS = 1 << 22  # (chunk, residue, option) cells per option list; beyond: rows only

Options = tuple[tuple[int, int], ...]  # (k, shift) per option, ordered by k


@dataclass(frozen=True, eq=False)
class FarPrefix:
    """The tabulated prefix ``[0, end)`` of an order (see the module docstring).

    ``ks[j][b]`` / ``shifts[j][b]``: chunk j's choice after a cumulative shift of
    residue b (0 / 0 for chunks without keys or weight); ``need``: the slack that
    lets every option of every prefix chunk be tried (then the tables hold).
    ``scan``: one chunk's choice from its ``V`` row (a tighter slack, no tables).
    """

    end: int
    ks: list[list[int]] | None
    shifts: list[list[int]] | None
    need: int
    matrix: np.ndarray
    row_of: dict[int, int]

    def scan(
        self,
        j: int,
        opts: Options,
        per_key: float,
        shift_so_far: int,
        pad_cost: float,
        slack: int,
    ) -> tuple[int, int]:
        """(k, shift) of prefix chunk j (it has keys) by the scan's rule, from its ``V`` row.

        Options are tried in order, skipping those beyond ``slack``; one replaces the
        best only when more than 1e-12 better.
        """
        values: list[float] = self.matrix[self.row_of[j]].tolist()
        period = len(values)
        best_k, best_value, best_shift = 0, None, 0
        for k, shift in opts:
            if shift > slack:
                continue
            value = per_key * values[(shift_so_far + shift) % period] - pad_cost * shift
            if best_value is None or value > best_value + 1e-12:
                best_k, best_value, best_shift = k, value, shift
        return best_k, best_shift

    def walk(self, period: int) -> tuple[list[int], int]:
        """(k per prefix chunk, total shift) from the tables (requires ``ks``)."""
        assert self.ks is not None and self.shifts is not None
        out: list[int] = []
        total = 0
        for k_row, s_row in zip(self.ks, self.shifts, strict=True):
            b = total % period
            out.append(k_row[b])
            total += s_row[b]
        return out, total


def tabulate(
    *,
    key_positions: Sequence[Sequence[int]],
    weights: Sequence[float],
    options: Sequence[Options],
    period: int,
    length: int,
    tail: int,
    window: int | None,
    residue_values: Sequence[float],
    pad_cost: float,
) -> FarPrefix | None:
    """The far prefix of ``key_positions`` (per ordered chunk), or None if it is short."""
    end = 0
    for keys, weight in zip(key_positions, weights, strict=True):
        if keys and weight > 0 and window is not None and length - max(keys) + tail <= window:
            break  # this chunk has a key near the end, and so has every later one
        end += 1
    scored = [j for j in range(end) if key_positions[j] and weights[j] > 0]
    if len(scored) < FAST_FROM:
        return None
    values = np.asarray(residue_values, dtype=np.float64)
    sizes = [len(key_positions[j]) for j in scored]
    residues = np.fromiter(
        (t % period for j in scored for t in key_positions[j]), dtype=np.int64, count=sum(sizes)
    )
    # V rows: each key's values at every shift, summed per chunk in key order (no BLAS:
    # its threads cost more CPU than these small products)
    gathered = values[(residues[:, None] + np.arange(period)[None, :]) % period]
    bounds = np.cumsum([0, *sizes[:-1]], dtype=np.int64)
    matrix = np.add.reduceat(gathered, bounds, axis=0)
    row_of = {j: r for r, j in enumerate(scored)}
    largest: dict[int, int] = {}  # per option list: its largest shift
    for j in scored:
        if id(options[j]) not in largest:
            largest[id(options[j])] = max(s for _, s in options[j])
    need = sum(largest[id(options[j])] for j in scored)
    ks = np.zeros((end, period), dtype=np.int64)
    shifts = np.zeros((end, period), dtype=np.int64)
    groups: dict[int, list[int]] = {}  # option lists by identity (one per pad table)
    for r, j in enumerate(scored):
        groups.setdefault(id(options[j]), []).append(r)
    per_key = np.asarray([weights[j] / n for j, n in zip(scored, sizes, strict=True)])
    base = np.arange(period)
    for members in groups.values():
        opts = options[scored[members[0]]]
        if period > _TABLE_PERIOD or len(members) * period * len(opts) > _TABLE_CELLS:
            return FarPrefix(end, None, None, need, matrix, row_of)
        sub, scale = matrix[members], per_key[members][:, None]
        best_value = scale * sub[:, (base + opts[0][1]) % period] - pad_cost * opts[0][1]
        best = np.zeros(best_value.shape, dtype=np.int64)
        for o, (_, shift) in enumerate(opts[1:], start=1):
            value = scale * sub[:, (base + shift) % period] - pad_cost * shift
            better = value > best_value + 1e-12
            best_value = np.where(better, value, best_value)
            best = np.where(better, o, best)
        rows = np.asarray([scored[r] for r in members], dtype=np.int64)
        ks[rows] = np.asarray([k for k, _ in opts], dtype=np.int64)[best]
        shifts[rows] = np.asarray([s for _, s in opts], dtype=np.int64)[best]
    return FarPrefix(end, ks.tolist(), shifts.tolist(), need, matrix, row_of)
