"""Pad search: filler units before each chunk and the end pad, pure over integers.

Steps 3 (``order_scorer``), 4 (``choose_pads``) and 5 (``best_pads``) of the
algorithm in ``phaseaware.assembly.plan.planner``, which re-exports every name here:
planning is read and called from there. ``reliability(position, distance)`` is
the expected accuracy of a key token at prompt ``position`` with ``distance``
tokens after it (``planner.key_reliability`` builds it from a profile);
``PadTable.shifts[k]`` is the number of tokens k filler units add.
"""

from __future__ import annotations

from collections.abc import Callable, Hashable, Sequence
from dataclasses import dataclass

from phaseaware.assembly.plan import pad_prefix
from phaseaware.assembly.plan.order import Plan
from phaseaware.caches import BoundedCache

__all__ = [
    "PadTable",
    "PadTables",
    "NO_PAD",
    "order_scorer",
    "choose_pads",
    "pads_value",
    "best_pads",
    "end_reserve",
    "freeze_moving",
    "kept_search",
    "pad_tokens",
]


@dataclass(frozen=True)
class PadTable:
    """Tokens added by a pad of k units: ``shifts[k]`` for k = 0..len(shifts)-1."""

    shifts: tuple[int, ...]


NO_PAD = PadTable((0,))  # a chunk that must not be padded


@dataclass(frozen=True)
class PadTables:
    """The pads planning may use: one table per input chunk, and the end pad's."""

    chunks: tuple[PadTable, ...]  # input order
    end: PadTable | None  # None: no end pad


def order_scorer(
    *,
    start: int,
    sizes: Sequence[int],
    key_offsets: Sequence[Sequence[int]],
    weights: Sequence[float],
    residue_reliability: Sequence[float],
    pad_tables: Sequence[PadTable],
    pad_cost: float,
) -> Callable[[tuple[int, ...]], float]:
    """A fast ``evaluate`` for ``search_orders``: the padded value of an order.

    Chunk i (input index) takes ``sizes[i]`` tokens with keys at
    ``key_offsets[i]`` within it; the first chunk starts at ``start``. Each
    chunk gets the best own pad for the residue it starts on (as
    ``choose_pads`` does), scored with the residue reliabilities alone: the
    raw window and the slack are left to the final ``choose_pads``. Best pads
    are memoised per (chunk, starting residue), so an order costs O(N).
    """
    period = len(residue_reliability)
    memo: dict[tuple[int, int], tuple[float, int]] = {}
    options: dict[int, tuple[tuple[int, int], ...]] = {}
    rel = list(residue_reliability)

    def best_pad(i: int, residue: int) -> tuple[float, int]:
        keys, weight = key_offsets[i], weights[i]
        if not keys or weight <= 0:
            return 0.0, 0
        table = pad_tables[i]
        if id(table) not in options:
            options[id(table)] = _pad_options(table, period)
        per_key = weight / len(keys)
        # key residues relative to the chunk start, counted once per residue
        counts = [0] * period
        for t in keys:
            counts[t % period] += 1
        present = [(r, c) for r, c in enumerate(counts) if c]
        best: tuple[float, int] | None = None
        for _, shift in options[id(table)]:
            base = residue + shift
            value = per_key * sum(c * rel[(base + r) % period] for r, c in present)
            value -= pad_cost * shift
            if best is None or value > best[0] + 1e-12:
                best = (value, shift)
        assert best is not None
        return best

    def score(order: tuple[int, ...]) -> float:
        total, position = 0.0, start
        for i in order:
            residue = position % period
            if (i, residue) not in memo:
                memo[i, residue] = best_pad(i, residue)
            value, shift = memo[i, residue]
            total += value
            position += shift + sizes[i]
        return total

    return score


def choose_pads(
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
    chunk's k is one of the smallest k reaching each residue mod ``period``;
    among options within 1e-12 of each other the earlier (smaller k) is kept.

    A pad moves every later key (its residue) and lengthens the distance of
    every earlier key to the end; it never moves a key closer to the end.
    ``window``: reliability no longer depends on the distance beyond it
    (``None``: it never does), so only earlier keys within ``window`` of the end
    are re-scored when a later pad pushes them away.
    ``residue_values`` (optional): ``reliability(t, d) == residue_values[t %
    period]`` whenever ``d > window``. Then the chunks whose keys are all
    farther than ``window`` from the end (a prefix of the order) are scored
    by residue in one vectorised pass, and where the slack lets every option
    be tried their choices are read from tables (``pad_prefix``): O(1) per chunk.
    """
    cache: dict[int, tuple[tuple[int, int], ...]] = {}
    options = []
    for table in pad_tables:
        if id(table) not in cache:
            cache[id(table)] = _pad_options(table, period)
        options.append(cache[id(table)])
    far = None
    if residue_values is not None and len(key_positions) >= pad_prefix.FAST_FROM:
        far = pad_prefix.tabulate(
            key_positions=key_positions, weights=weights, options=options, period=period,
            length=length, tail=tail, window=window, residue_values=residue_values,
            pad_cost=pad_cost,
        )  # fmt: skip
    ks: list[int] = []
    shift_so_far = start = 0
    if far is not None and far.ks is not None and slack >= far.need:
        ks, shift_so_far = far.walk(period)
        slack -= shift_so_far
        start = far.end
    # earlier keys whose reliability may still change: (position, distance, weight per key)
    near: list[tuple[int, int, float]] = []
    for j in range(start, len(key_positions)):
        keys, weight, opts = key_positions[j], weights[j], options[j]
        if not keys or weight <= 0:
            ks.append(0)
            continue
        per_key = weight / len(keys)
        if far is not None and j < far.end:  # every key far from the end: nothing near changes
            best_k, best_shift = far.scan(j, opts, per_key, shift_so_far, pad_cost, slack)
        else:
            dists = [length - t + tail for t in keys]
            by_residue = (  # every key past the window: reliability is the residue's value
                residue_values
                if residue_values is not None and window is not None and min(dists) > window
                else None
            )
            best_k, best_shift = _scan(
                keys, opts, per_key, shift_so_far, slack, near, reliability, pad_cost, dists,
                by_residue,
            )  # fmt: skip
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


def _scan(
    keys: Sequence[int],
    opts: Sequence[tuple[int, int]],
    per_key: float,
    shift_so_far: int,
    slack: int,
    near: Sequence[tuple[int, int, float]],
    reliability: Callable[[int, int], float],
    pad_cost: float,
    dists: Sequence[int],
    by_residue: Sequence[float] | None = None,
) -> tuple[int, int]:
    """(k, shift) of one chunk, every option scored by ``reliability`` (the general case).

    ``by_residue``: every key is past the window, so ``reliability(t, d) ==
    by_residue[t % period]``; the keys' values are then read from the table rotated by the
    option's offset: the same values summed in the same order (bit-identical)."""
    single = (keys[0], dists[0]) if len(keys) == 1 else None
    period = len(by_residue) if by_residue is not None else 0
    residues = [t % period for t in keys] if by_residue is not None and single is None else None
    best_k, best_value, best_shift = 0, None, 0
    for k, shift in opts:
        if shift > slack:
            continue
        offset = shift_so_far + shift
        if residues is not None and by_residue is not None:  # many keys, all by residue
            turn = offset % period
            rotated = [*by_residue[turn:], *by_residue[:turn]]
            value = per_key * sum(map(rotated.__getitem__, residues))
        elif single is not None:  # one key: skip the generator (hot path)
            value = per_key * reliability(single[0] + offset, single[1])
        else:
            value = per_key * sum(
                reliability(t + offset, d) for t, d in zip(keys, dists, strict=True)
            )
        for position, distance, w in near:
            value += w * (reliability(position, distance + shift) - reliability(position, distance))
        value -= pad_cost * shift
        if best_value is None or value > best_value + 1e-12:
            best_k, best_value, best_shift = k, value, shift
    return best_k, best_shift


def pads_value(
    *,
    key_positions: Sequence[Sequence[int]],
    weights: Sequence[float],
    reliability: Callable[[int, int], float],
    shifts: Sequence[int],
    length: int,
    tail: int = 0,
) -> float:
    """``Σ_i (w_i / n_i) Σ_j reliability(final position, final distance)`` of a padding.

    ``shifts[i]`` tokens are added right before chunk i (context order) and
    ``tail`` after the last chunk; positions and ``length`` are unpadded.
    """
    total_pad = sum(shifts) + tail
    value, before = 0.0, 0
    for keys, weight, shift in zip(key_positions, weights, shifts, strict=True):
        before += shift
        if not keys or weight <= 0:
            continue
        per_key = weight / len(keys)
        for t in keys:
            value += per_key * reliability(t + before, length + total_pad - (t + before))
    return value


def best_pads(
    *,
    key_positions: Sequence[Sequence[int]],
    weights: Sequence[float],
    pad_tables: Sequence[PadTable],
    end_shifts: Sequence[int] | None,
    period: int,
    window: int | None,
    reliability: Callable[[int, int], float],
    length_factor: Callable[[int], float],
    pad: bool,
    pad_cost: float,
    length: int,
    slack: int,
    residue_values: Sequence[float] | None = None,
) -> tuple[tuple[int, ...], int]:
    """(pads per ordered chunk, end pad k): the best padding of one order.

    ``key_positions``, ``weights`` and ``pad_tables`` are per ordered chunk,
    positions unpadded in a prompt of ``length`` tokens; ``end_shifts[k]``
    tokens are added by an end pad of k units (None: no end pad). ``slack``
    tokens are free for all padding; ``pad`` false: no chunk pads.
    ``length_factor(n)`` is the profile's factor for an n-token prompt. Each
    end pad the slack allows is tried; the plan with the best ``length factor
    × key reliability − pad_cost × padding tokens`` wins (the first on ties).
    Chunks whose keys no end pad can bring within ``window`` of the end are
    padded once; only the chunks near the end are re-planned per end pad.
    """
    n = len(key_positions)
    tails = [(0, 0)]
    if end_shifts is not None:
        tails = [(k, s) for k, s in enumerate(end_shifts) if s <= slack]
    split = n
    if window is not None:
        reach = window + max(s for _, s in tails)
        split = next(
            (j for j, keys in enumerate(key_positions) if any(length - t <= reach for t in keys)),
            n,
        )

    def shifted(j0: int, j1: int, shift: int) -> Sequence[Sequence[int]]:
        if not shift:
            return key_positions[j0:j1]
        return [tuple(t + shift for t in keys) for keys in key_positions[j0:j1]]

    def pads_for(j0: int, j1: int, shift: int, tail: int, room: int) -> tuple[int, ...]:
        if not pad or j0 == j1:
            return tuple(0 for _ in range(j0, j1))
        return choose_pads(
            key_positions=shifted(j0, j1, shift), weights=weights[j0:j1], period=period,
            reliability=reliability, pad_tables=pad_tables[j0:j1], pad_cost=pad_cost,
            slack=max(0, room), length=length + shift, tail=tail, window=window,
            residue_values=residue_values,
        )  # fmt: skip

    def value_of(j0: int, j1: int, pads: Sequence[int], shift: int, tail: int) -> float:
        tables = pad_tables[j0:j1]
        return pads_value(
            key_positions=shifted(j0, j1, shift), weights=weights[j0:j1], reliability=reliability,
            shifts=[table.shifts[k] for table, k in zip(tables, pads, strict=True)],
            length=length + shift, tail=tail,
        )  # fmt: skip

    head = pads_for(0, split, 0, 0, slack)
    head_shift = sum(table.shifts[k] for table, k in zip(pad_tables, head, strict=False))
    head_value = value_of(0, split, head, 0, 0)
    best: tuple[float, tuple[int, ...], int] | None = None
    for end_k, tail in tails:
        room = slack - head_shift - tail
        if room < 0:
            continue
        rest = pads_for(split, n, head_shift, tail, room)
        added = head_shift + tail
        added += sum(table.shifts[k] for table, k in zip(pad_tables[split:], rest, strict=True))
        value = head_value + value_of(split, n, rest, head_shift, tail)
        value = length_factor(length + added) * value - pad_cost * added
        if best is None or value > best[0] + 1e-12:
            best = (value, head + rest, end_k)
    if best is None:  # the head took the slack the end pads need
        return head + tuple(0 for _ in range(split, n)), 0
    return best[1], best[2]


def _pad_options(pad_table: PadTable, period: int) -> tuple[tuple[int, int], ...]:
    """(k, shift) for the smallest k reaching each residue, ordered by k."""
    options: dict[int, tuple[int, int]] = {}
    for k, shift in enumerate(pad_table.shifts):
        options.setdefault(shift % period, (k, shift))
    return tuple(sorted(options.values()))


def end_reserve(
    *, end_shifts: Sequence[int] | None, length_period: int | None, length_pad: bool
) -> int:
    """Tokens kept free for the end pad of a length-residue correction (0: none)."""
    if end_shifts is None or length_period is None or not length_pad:
        return 0
    return max(end_shifts[:length_period])


def pad_tokens(*, tables: PadTables, plan: Plan) -> int:
    """Filler tokens ``plan`` adds by the tables (chunk pads plus the end pad)."""
    total = sum(tables.chunks[i].shifts[k] for i, k in zip(plan.order, plan.pads, strict=True))
    if tables.end is not None:
        total += tables.end.shifts[plan.end_pad]
    return total


def freeze_moving(tables: PadTables, plan: Plan, *, pads: Sequence[int], end_pad: int) -> PadTables:
    """``tables`` with no padding for the chunks (and end pad) whose pads moved from ``plan``."""
    chunks = list(tables.chunks)
    for i, old, new in zip(plan.order, plan.pads, pads, strict=True):
        if old != new:
            chunks[i] = NO_PAD
    end = tables.end if end_pad == plan.end_pad else None
    return PadTables(chunks=tuple(chunks), end=end)


Pads = tuple[tuple[int, ...], int]
Search = Callable[[PadTables, Sequence[int], Sequence[Sequence[int]], int, int], Pads]
_KEPT: BoundedCache[tuple[Hashable, ...], tuple[object, Pads]] = BoundedCache(
    max_entries=256, name="assembly.pad_searches"
)


def kept_search(
    search: Search, *, profile: object, settings: tuple[Hashable, ...], weights: Sequence[float]
) -> Search:
    """``search`` with its answers kept, keyed by all it reads (the profile by identity)."""
    base = (id(profile), settings, tuple(weights))

    def kept(
        tables: PadTables,
        order: Sequence[int],
        base_keys: Sequence[Sequence[int]],
        length: int,
        slack: int,
    ) -> Pads:
        keys = tuple(tuple(int(t) for t in k) for k in base_keys)
        key = (base, tables, tuple(order), keys, int(length), int(slack))
        known = _KEPT.get(key)
        if known is not None and known[0] is profile:
            return known[1]
        found = search(tables, order, base_keys, length, slack)
        _KEPT.put(key, (profile, found))
        return found

    return kept
