"""Every process-wide cache phaseaware keeps, in one list: sized, bounded, clearable.

A module that keeps a cache registers it here once, at import, with the functions that
size and clear it and the bound that keeps it from growing. ``list_caches()`` reports
them all (what a long-running server wants to watch; a cache is listed once the module
that owns it is imported: before that it holds nothing), ``clear_caches()`` empties them
(tests, or a process that changed tokenizer files on disk). Caches never change a
result: clearing one only costs time.

Every hand-written cache is a :class:`BoundedCache`: a thread-safe LRU bounded in entries
and/or bytes. Given a ``name`` it registers itself here; without one it is a per-object memo,
bounded where it lives and not listed (a conversation layout's split memo, 64 entries).
Other per-object memos are bounded by their own rule: a tokenizer's vocabulary tables (one
per tokenizer object), a ``CutRule``'s pair memo (reset past 65,536 pairs).
"""

from __future__ import annotations

import threading
from collections import OrderedDict
from collections.abc import Callable, Hashable
from dataclasses import dataclass
from typing import Generic, TypeVar

__all__ = ["BoundedCache", "CacheInfo", "clear_caches", "list_caches", "register_cache"]

K = TypeVar("K", bound=Hashable)
V = TypeVar("V")


@dataclass(frozen=True)
class CacheInfo:
    """One registered cache: ``entries`` now, ``nbytes`` now (None: not measured), and
    ``bound``, the rule that keeps it finite (e.g. "LRU, 64 MiB")."""

    name: str
    entries: int
    nbytes: int | None
    bound: str


@dataclass(frozen=True)
class _Registered:
    size: Callable[[], tuple[int, int | None]]
    clear: Callable[[], None]
    bound: str


_lock = threading.Lock()
_registry: dict[str, _Registered] = {}


def register_cache(
    name: str,
    *,
    size: Callable[[], tuple[int, int | None]],
    clear: Callable[[], None],
    bound: str,
) -> None:
    """Register a process-wide cache. ``size()`` returns (entries, bytes or None).

    Registering a name again replaces the entry (a module reloaded in tests)."""
    if not bound:
        raise ValueError(f"cache {name!r} must state its bound (an unbounded cache leaks)")
    with _lock:
        _registry[name] = _Registered(size=size, clear=clear, bound=bound)


def list_caches() -> list[CacheInfo]:
    """Every registered cache, by name, with its size now."""
    with _lock:
        items = sorted(_registry.items())
    out = []
    for name, entry in items:
        entries, nbytes = entry.size()
        out.append(CacheInfo(name=name, entries=entries, nbytes=nbytes, bound=entry.bound))
    return out


def clear_caches() -> None:
    """Empty every registered cache (results never change; only time does)."""
    with _lock:
        items = list(_registry.values())
    for entry in items:
        entry.clear()


class BoundedCache(Generic[K, V]):
    """A thread-safe LRU, bounded in entries (``max_entries``) and/or bytes (``max_bytes``).

    ``size_of(key, value)`` gives an entry's bytes (required with ``max_bytes``); an entry
    larger than ``max_bytes`` alone is not kept. Past either bound the least recently used
    entries are evicted. ``get`` counts ``hits``/``misses`` and refreshes the entry;
    ``peek`` does neither. With a ``name`` the cache is listed (``list_caches``) and
    emptied by ``clear_caches``; ``bound`` (derived when not given) states the rule.
    """

    def __init__(
        self,
        *,
        max_entries: int | None = None,
        max_bytes: int | None = None,
        size_of: Callable[[K, V], int] | None = None,
        name: str | None = None,
        bound: str | None = None,
    ) -> None:
        for label, value in (("max_entries", max_entries), ("max_bytes", max_bytes)):
            if value is not None and (
                isinstance(value, bool) or not isinstance(value, int) or value < 0
            ):
                raise ValueError(f"{label} must be an int >= 0, got {value!r}")
        if max_entries is None and max_bytes is None:
            raise ValueError("a cache needs max_entries or max_bytes (an unbounded cache leaks)")
        if max_bytes is not None and size_of is None:
            raise ValueError("max_bytes needs size_of(key, value) to measure an entry")
        self.max_entries = max_entries
        self.max_bytes = max_bytes
        self._size_of = size_of
        self._entries: OrderedDict[K, tuple[V, int]] = OrderedDict()
        self._bytes = 0
        self._lock = threading.Lock()
        self.hits = 0
        self.misses = 0
        if name is not None:
            register_cache(
                name,
                size=lambda: (len(self), self.nbytes if max_bytes is not None else None),
                clear=self.clear,
                bound=bound or _bound_text(max_entries, max_bytes),
            )

    @property
    def nbytes(self) -> int:
        """Bytes the entries hold now (0 without ``max_bytes``; always <= ``max_bytes``)."""
        return self._bytes

    def __len__(self) -> int:
        return len(self._entries)

    def get(self, key: K) -> V | None:
        """The value under ``key`` (now the most recently used), or None."""
        with self._lock:
            found = self._entries.get(key)
            if found is None:
                self.misses += 1
                return None
            self._entries.move_to_end(key)
            self.hits += 1
            return found[0]

    def peek(self, key: K) -> bool:
        """Whether ``key`` is cached (no hit or miss counted, LRU order unchanged)."""
        return key in self._entries

    def snapshot_keys(self) -> list[K]:
        """The keys now, least recently used first (a copy)."""
        with self._lock:
            return list(self._entries)

    def put(self, key: K, value: V) -> None:
        """Keep ``value`` under ``key``, evicting the least recently used past the bounds."""
        size = self._size_of(key, value) if self._size_of is not None else 0
        if (self.max_bytes is not None and size > self.max_bytes) or self.max_entries == 0:
            return
        with self._lock:
            old = self._entries.pop(key, None)
            if old is not None:
                self._bytes -= old[1]
            self._entries[key] = (value, size)
            self._bytes += size
            while (self.max_bytes is not None and self._bytes > self.max_bytes) or (
                self.max_entries is not None and len(self._entries) > self.max_entries
            ):
                _, (_, dropped) = self._entries.popitem(last=False)
                self._bytes -= dropped

    def pop(self, key: K) -> V | None:
        """Remove ``key`` and return its value (no hit or miss counted), or None."""
        with self._lock:
            found = self._entries.pop(key, None)
            if found is None:
                return None
            self._bytes -= found[1]
            return found[0]

    def clear(self) -> None:
        """Drop every entry (results never change; only time does)."""
        with self._lock:
            self._entries.clear()
            self._bytes = 0


def _bound_text(max_entries: int | None, max_bytes: int | None) -> str:
    parts = [f"{max_entries} entries"] if max_entries is not None else []
    if max_bytes is not None:
        mib = max_bytes / (1024 * 1024)
        parts.append(f"{mib:g} MiB" if mib >= 1 else f"{max_bytes} bytes")
    return "LRU, " + " and ".join(parts)
