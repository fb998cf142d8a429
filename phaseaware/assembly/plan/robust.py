"""Offset-robust planning: which residues the copies of the top evidence must reach.

When the server's offset is any of a declared set ``D`` (``AssemblyOptions.offsets``), the
top evidence is present in copies whose prompt residues differ, so that for every
offset ``d`` in ``D`` at least one copy's model residue ``(t + d) mod S`` is *reliable*:
within ``tolerance`` of the best residue's reliability. Pure (ints only, checked against
brute force by property tests); ``copy_pad`` plans each copy's pad on the filler's pad
table. ``verify.final`` renders the copies and confirms them by re-tokenizing.
"""

from __future__ import annotations

import itertools
from collections.abc import Sequence

__all__ = [
    "copy_pad",
    "covered_offsets",
    "covering_residues",
    "primary_offset",
    "reliable_residues",
]


def reliable_residues(reliability: Sequence[float], *, tolerance: float) -> frozenset[int]:
    """Residues whose reliability is at least ``max(reliability) - tolerance``."""
    best = max(reliability)
    return frozenset(r for r, value in enumerate(reliability) if value >= best - tolerance)


def covered_offsets(
    *, copy_residues: Sequence[int], offsets: Sequence[int], period: int, reliable: frozenset[int]
) -> tuple[int, ...]:
    """The offsets ``d`` for which some copy (prompt residue ``c``) has ``(c + d) % period``
    reliable."""
    return tuple(d for d in offsets if any((c + d) % period in reliable for c in copy_residues))


def covering_residues(
    *, existing: Sequence[int], offsets: Sequence[int], period: int, reliable: frozenset[int]
) -> tuple[int, ...]:
    """The fewest prompt residues to add to ``existing`` so that every offset is covered.

    Smallest set first, then the lexicographically first; offsets that no residue
    can cover (``reliable`` empty) are left uncovered. Exhaustive over subsets of
    ``range(period)`` by size, so it is exact (periods are small: 2-16).
    """
    target = set(d for d in offsets if any((r + d) % period in reliable for r in range(period)))
    have = set(covered_offsets(copy_residues=existing, offsets=offsets, period=period,
                               reliable=reliable))  # fmt: skip
    if target <= have:
        return ()
    for size in range(1, period + 1):
        for extra in itertools.combinations(range(period), size):
            got = covered_offsets(
                copy_residues=(*existing, *extra), offsets=offsets, period=period,
                reliable=reliable,
            )  # fmt: skip
            if target <= set(got):
                return extra
    return ()  # unreachable: all residues cover every coverable offset


def primary_offset(offsets: Sequence[int]) -> int:
    """The offset the chunks themselves are planned for: the smallest of the set."""
    return min(offsets)


def copy_pad(
    *,
    key_token: int,
    tokens: int,
    shifts: Sequence[int],
    residue: int,
    period: int,
    budget: int,
    tries: int,
) -> int | None:
    """The fewest filler units before a copy that put its key on prompt ``residue``.

    ``key_token``: the key's token with the copy unpadded, in a prompt of ``tokens``
    tokens; ``shifts[k]``: the tokens a pad of k units adds (the filler's pad table).
    Pads are tried in order, k = 0 .. ``tries`` - 1, as each would be measured: None
    when the prompt passes ``budget`` first, or no pad reaches the residue.
    """
    for k in range(min(tries, len(shifts))):
        if tokens + shifts[k] - shifts[0] > budget:
            return None
        if (key_token + shifts[k] - shifts[0]) % period == residue:
            return k
    return None
