"""Every process-wide cache phaseaware keeps, in one list: sized, bounded, clearable.

A module that keeps a cache registers it here once, at import, with the functions that
size and clear it and the bound that keeps it from growing. ``list_caches()`` reports
them all (what a long-running server wants to watch; a cache is listed once the module
that owns it is imported: before that it holds nothing), ``clear_caches()`` empties them
(tests, or a process that changed tokenizer files on disk). Caches never change a
result: clearing one only costs time.

Per-object memos are bounded where they live and are not listed: a tokenizer's vocabulary
tables (one per tokenizer object), a ``CutRule``'s pair memo (reset past 65,536 pairs), a
conversation layout's split memo (64 entries).
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from dataclasses import dataclass

__all__ = ["CacheInfo", "clear_caches", "list_caches", "register_cache"]


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
