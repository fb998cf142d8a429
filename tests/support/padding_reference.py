"""The pad search as it was before the residue-matrix speed-up (commit b3001c3), kept as
the oracle of ``tests/unit/test_padding_fast.py``: the fast ``choose_pads`` must choose
exactly what this per-key scan chooses."""

from __future__ import annotations

from collections.abc import Callable, Sequence

import numpy as np

from phaseaware.assembly.plan.padding import PadTable

__all__ = ["reference_choose_pads"]


def reference_choose_pads(
    *,
    key_positions: Sequence[Sequence[int]],
    weights: Sequence[float],
    period: int,
    reliability: Callable[[int, int], float],
    pad_tables: Sequence[PadTable],
    pad_cost: float,
    slack: int,
    length: int,
    tail: int = 0,
    window: int | None = None,
    residue_values: Sequence[float] | None = None,
) -> tuple[int, ...]:
    """Filler units ``k`` before each chunk (in context order).

    ``key_positions[i]`` are chunk i's key token positions when no chunk is
    padded and ``length`` is that unpadded prompt's length; ``tail`` tokens
    (an end pad) will follow the last chunk. ``reliability(position, distance)``
    is the expected accuracy of a key token at absolute ``position`` with
    ``distance`` tokens from it to the end of the final prompt.
    ``pad_tables[i]`` gives the tokens added by k filler units before chunk i;
    ``slack`` is the number of tokens the budget leaves for padding. Each
    chunk's k is one of the smallest k reaching each residue mod ``period``.

    A pad moves every later key (its residue) and lengthens the distance of
    every earlier key to the end; it never moves a key closer to the end.
    ``window``: reliability no longer depends on the distance beyond it
    (``None``: it never does), so only earlier keys within ``window`` of the end
    are re-scored when a later pad pushes them away.
    ``residue_values`` (optional): ``reliability(t, d) == residue_values[t %
    period]`` whenever ``d > window``; then a chunk whose keys are all farther
    than ``window`` from the end is scored over its distinct key residues at
    once (numpy, O(residues x options)) instead of one call per key and option.
    """
    cache: dict[int, tuple[tuple[int, int], ...]] = {}
    table_shifts: dict[int, np.ndarray] = {}
    sums_memo: dict[tuple[int, tuple[tuple[int, int], ...]], list[float]] = {}
    values = np.asarray(residue_values, dtype=np.float64) if residue_values is not None else None
    ks: list[int] = []
    shift_so_far = 0
    # earlier keys whose reliability may still change: (position, distance, weight per key)
    near: list[tuple[int, int, float]] = []
    for keys, weight, table in zip(key_positions, weights, pad_tables, strict=True):
        if not keys or weight <= 0:
            ks.append(0)
            continue
        if id(table) not in cache:
            cache[id(table)] = _pad_options(table, period)
        per_key = weight / len(keys)
        dists = [length - t + tail for t in keys]  # a pad before the chunk leaves them as is
        single = (keys[0], dists[0]) if len(keys) == 1 else None
        best_k, best_value, best_shift = 0, None, 0
        fast: list[float] | None = None
        if values is not None and (window is None or min(dists) > window):
            if id(table) not in table_shifts:
                table_shifts[id(table)] = np.asarray([s for _, s in cache[id(table)]])
            fast = _residue_sums(
                values, keys, shift_so_far, table_shifts[id(table)], period, sums_memo
            )
        for j, (k, shift) in enumerate(cache[id(table)]):
            if shift > slack:
                continue
            offset = shift_so_far + shift
            if fast is not None:
                value = per_key * fast[j]
            elif single is not None:  # one key: skip the generator (hot path)
                value = per_key * reliability(single[0] + offset, single[1])
            else:
                value = per_key * sum(
                    reliability(t + offset, d) for t, d in zip(keys, dists, strict=True)
                )
            for position, distance, w in near:
                value += w * (
                    reliability(position, distance + shift) - reliability(position, distance)
                )
            value -= pad_cost * shift
            if best_value is None or value > best_value + 1e-12:
                best_k, best_value, best_shift = k, value, shift
        ks.append(best_k)
        shift_so_far += best_shift
        slack -= best_shift
        if window is not None:
            near = [(p, d + best_shift, w) for p, d, w in near if d + best_shift <= window]
            near += [
                (t + shift_so_far, length - t + tail, per_key)
                for t in keys
                if length - t + tail <= window
            ]
    return tuple(ks)


def _residue_sums(
    values: np.ndarray,
    keys: Sequence[int],
    base: int,
    shifts: np.ndarray,
    period: int,
    memo: dict[tuple[int, tuple[tuple[int, int], ...]], list[float]] | None = None,
) -> list[float]:
    """``[Σ_t values[(t + base + s) % period] for s in shifts]`` over distinct key residues.

    ``memo`` (optional) keeps the sums per (shifts, residue tally in first-seen
    order): equal inputs to the same numpy operations, so equal sums.
    """
    tally: dict[int, int] = {}
    for t in keys:
        r = (t + base) % period
        tally[r] = tally.get(r, 0) + 1
    key = (id(shifts), tuple(tally.items()))
    if memo is not None and key in memo:
        return memo[key]
    sums = _tally_sums(values, tally, shifts, period)
    if memo is not None:
        memo[key] = sums
    return sums


def _tally_sums(
    values: np.ndarray, tally: dict[int, int], shifts: np.ndarray, period: int
) -> list[float]:
    residues = np.fromiter(tally.keys(), dtype=np.int64, count=len(tally))
    counts = np.fromiter(tally.values(), dtype=np.float64, count=len(tally))
    index = (residues[:, None] + shifts[None, :]) % period
    sums: list[float] = (counts @ values[index]).tolist()
    return sums


def _pad_options(pad_table: PadTable, period: int) -> tuple[tuple[int, int], ...]:
    """(k, shift) for the smallest k reaching each residue, ordered by k."""
    options: dict[int, tuple[int, int]] = {}
    for k, shift in enumerate(pad_table.shifts):
        options.setdefault(shift % period, (k, shift))
    return tuple(sorted(options.values()))
