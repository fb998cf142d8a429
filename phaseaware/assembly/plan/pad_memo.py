"""The pad search's results kept across calls: a warm ``assemble`` searches the same pads.

``best_pads`` is a pure function of its inputs. A repeated call (the same chunks, the same
question) asks it the same questions: the initial plan's, then verification's with the
measured keys (the same when the estimate was right). ``kept_search`` wraps one request's
search so an answer found before, for exactly the same inputs, is read back instead of
searched again. The key holds every input the search reads: the profile (by identity:
the entry holds it, so its ``id`` is not reused meanwhile; its reliabilities, period,
window and length effect are what the search reads of it), the request's padding
settings and server offsets, the relevance weights, the pad tables, the order, the
unpadded key positions, the length and the slack. Bounded: :data:`MAX_ENTRIES` entries,
least recently used evicted.
"""

from __future__ import annotations

from collections.abc import Callable, Hashable, Sequence
from typing import TYPE_CHECKING

from phaseaware.caches import BoundedCache

if TYPE_CHECKING:  # pragma: no cover
    from phaseaware.assembly.plan.padding import PadTables
    from phaseaware.profiles.model import Profile

__all__ = ["MAX_ENTRIES", "kept_search"]

MAX_ENTRIES = 256

Pads = tuple[tuple[int, ...], int]
Search = Callable[["PadTables", Sequence[int], Sequence[Sequence[int]], int, int], Pads]

_KEPT: BoundedCache[tuple[Hashable, ...], tuple[object, Pads]] = BoundedCache(
    max_entries=MAX_ENTRIES, name="assembly.pad_searches"
)


def kept_search(
    search: Search, *, profile: Profile, settings: tuple[Hashable, ...], weights: Sequence[float]
) -> Search:
    """``search`` with its answers kept; ``settings``: every other request field it reads."""
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
