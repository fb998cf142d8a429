"""Remembered renders of a conversation's start: an agent step renders its new message only.

An agent re-sends its whole conversation each step, one message (or two) longer,
and a step renders it several times (the sent text, the new message with a
sentinel, with the context). A chat format whose text for ``messages[:k]`` is
fixed once those messages are (it depends on nothing after them) keeps a render
here and, next time, renders only the messages after the longest remembered
start of the list. What a format keeps, and why its rule makes the kept text
exact, is the format's business (:mod:`phaseaware.chat.formats` for ``chatml``
and ``none``, :mod:`phaseaware.chat.deepseek_encoding` for the DeepSeek-V4
family); this module finds the remembered start.

A remembered render is found only for the same format key (the format and every
setting its text depends on) and messages EQUAL to its own, compared field by
field (the same objects, as an agent resends them, compare at once): an edit of
any earlier message, however small, finds a shorter start or none.
"""

from __future__ import annotations

import sys
from collections.abc import Callable, Hashable
from typing import Generic, Protocol, TypeVar

from phaseaware.caches import BoundedCache
from phaseaware.chat.messages import Message

__all__ = ["PrefixRender", "PrefixRenders"]


class PrefixRender(Protocol):
    """What a format keeps: the messages rendered (and whatever else it needs)."""

    @property
    def messages(self) -> tuple[Message, ...]: ...


R = TypeVar("R", bound=PrefixRender)


class PrefixRenders(Generic[R]):
    """A bounded LRU (``caches.BoundedCache``, listed as ``name``) of renders by format
    key, length and last message; :meth:`longest` finds the longest kept start."""

    def __init__(
        self,
        *,
        name: str,
        size_of: Callable[[R], int],
        max_entries: int = 32,
        max_bytes: int = 64 << 20,
    ) -> None:
        self._cache: BoundedCache[tuple[Hashable, int, int], R] = BoundedCache(
            max_entries=max_entries,
            max_bytes=max_bytes,
            size_of=lambda _, render: size_of(render) + sys.getsizeof(render.messages),
            name=name,
        )

    def __len__(self) -> int:
        return len(self._cache)

    def clear(self) -> None:
        self._cache.clear()

    def longest(
        self, key: Hashable, messages: tuple[Message, ...], *, min_messages: int = 1
    ) -> R | None:
        """The kept render under ``key`` of the longest start of ``messages`` (at least
        ``min_messages`` of them), or None."""
        lengths = sorted(
            (k for k in self._cache.snapshot_keys() if k[0] == key and k[1] >= min_messages),
            key=lambda k: -k[1],
        )
        for cached_key in lengths:
            n = cached_key[1]
            if n > len(messages):
                continue
            found = self._cache.get(cached_key)
            if (
                found is not None
                and messages[n - 1] == found.messages[-1]  # the likeliest difference first
                and messages[:n] == found.messages  # identical items compare at once
            ):
                return found
        return None

    def put(self, key: Hashable, render: R) -> None:
        """Keep ``render`` (of ``render.messages``, at least one) under ``key``."""
        if render.messages:
            self._cache.put((key, len(render.messages), hash(render.messages[-1])), render)
