"""Recent replies' prompt ids by response id, for a check that sees a reply apart from its body.

A transport hook (LangChain: an httpx response hook on the chat model's own client) sees
each reply's body. A callback that checks the call (LangChain's ``on_llm_end``) sees only
the parsed reply: the framework keeps the response ``id`` and the usage but drops the
prompt's ids. :class:`ReplyStore` joins the two. :meth:`ReplyStore.keep` holds what a
check needs of each body (id, model, fingerprint, usage, the prompt's ids when it carries
them), and :meth:`ReplyStore.take` hands it, once, to the check holding that response id.

Why this never hands a call another call's ids:

- The key is the response id the server wrote into that reply, not the time, the thread or
  the task, so concurrent calls cannot meet. vLLM and SGLang draw it at random per request.
- A caller can fix it (vLLM's ``X-Request-Id`` or ``request_id``, SGLang's ``rid``). An id
  kept a second time before it was taken is therefore ambiguous: no copy is handed over
  (the check falls back to the count) until every copy was taken. Bodies without ids are
  kept too (without ids), so they take part in this rule.
- :meth:`take` also needs the reply's own prompt token count to equal the body's.
- Each body is taken at most once.

Bounded: a :class:`~phaseaware.caches.BoundedCache` in entries and bytes (the ids as 4-byte
integers). A body nobody takes is evicted, oldest first; an evicted one is checked by count.
"""

from __future__ import annotations

import threading
from array import array
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from phaseaware.caches import BoundedCache
from phaseaware.endpoints import reported_prompt_ids, reported_prompt_tokens

__all__ = ["KeptReply", "ReplyStore"]

_HEAD = ("id", "model", "system_fingerprint", "usage")  # what a check reads besides the ids
_ENTRY_BYTES = 512  # an entry's own overhead, roughly (its head, the record)


@dataclass(frozen=True)
class KeptReply:
    """What a usage check reads of one reply body: its head (``id``, ``model``,
    ``system_fingerprint``, ``usage``) and the prompt's ids (4 bytes each; ``None``: the
    body carried none), wherever the server put them (vLLM: the response, SGLang: the
    first choice)."""

    head: Mapping[str, Any]
    ids: array[int] | None

    @classmethod
    def of(cls, body: Mapping[str, Any]) -> KeptReply:
        ids = reported_prompt_ids(body)
        head = {key: body[key] for key in _HEAD if key in body}
        return cls(head, array("i", ids) if ids is not None else None)

    @property
    def reply_id(self) -> str | None:
        value = self.head.get("id")
        return value if isinstance(value, str) and value else None

    @property
    def prompt_tokens(self) -> int | None:
        """The body's own ``usage.prompt_tokens`` (``None``: it has none)."""
        return reported_prompt_tokens(self.head)

    @property
    def nbytes(self) -> int:
        return _ENTRY_BYTES + (self.ids.itemsize * len(self.ids) if self.ids is not None else 0)

    def body(self) -> dict[str, Any]:
        """The head, with ``prompt_token_ids`` where the body carried them: what
        :func:`~phaseaware.integrate.check_raw_usage` reads."""
        ids = {"prompt_token_ids": self.ids.tolist()} if self.ids is not None else {}
        return {**self.head, **ids}


@dataclass(frozen=True)
class _Kept:
    reply: KeptReply | None  # None: ambiguous (the id came again before it was taken)
    waiting: int  # copies kept under this id and not yet taken


def _size(_key: str, kept: _Kept) -> int:
    return kept.reply.nbytes if kept.reply is not None else _ENTRY_BYTES


class ReplyStore:
    """Reply bodies' prompt ids by response id (the module docstring); thread-safe.
    ``name``: listed by ``phaseaware.caches.list_caches`` under it."""

    def __init__(
        self, *, max_entries: int = 256, max_bytes: int = 32 << 20, name: str | None = None
    ) -> None:
        self._kept: BoundedCache[str, _Kept] = BoundedCache(
            max_entries=max_entries, max_bytes=max_bytes, size_of=_size, name=name
        )
        self._lock = threading.Lock()

    def __len__(self) -> int:
        return len(self._kept)

    def keep(self, body: Mapping[str, Any]) -> bool:
        """Keep a chat-completion reply ``body`` (a JSON mapping) under its ``id``;
        ``False``: it has no id (nothing could find it)."""
        reply = KeptReply.of(body)
        reply_id = reply.reply_id
        if reply_id is None:
            return False
        with self._lock:
            old = self._kept.get(reply_id)
            # the same id again before it was taken: neither copy is handed over
            kept = _Kept(reply, 1) if old is None else _Kept(None, old.waiting + 1)
            self._kept.put(reply_id, kept)
        return True

    def take(self, reply_id: object, *, prompt_tokens: int | None) -> dict[str, Any] | None:
        """The kept body of reply ``reply_id`` (its head and ``prompt_token_ids``), removed;
        ``None``: not kept (or evicted), ambiguous, without ids, or its prompt token count
        is not ``prompt_tokens`` (the reply's own; ``None``: the reply has none)."""
        if not isinstance(reply_id, str):
            return None
        with self._lock:
            kept = self._kept.pop(reply_id)
            if kept is not None and kept.waiting > 1:  # the other copies still wait
                self._kept.put(reply_id, _Kept(None, kept.waiting - 1))
        reply = kept.reply if kept is not None else None
        if reply is None or reply.ids is None:
            return None
        if prompt_tokens is None or reply.prompt_tokens != prompt_tokens:
            return None
        return reply.body()

    def clear(self) -> None:
        """Forget every kept body."""
        self._kept.clear()
