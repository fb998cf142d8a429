"""Formats that write each message on its own, rendered after a kept start.

A :class:`MessageWiseFormat`'s text is ``opening() + message_text(0, m0) + ... +
closing(...)``, so the text of a conversation's first messages (without the closing) is
the start of every longer render: :func:`render_after_kept` writes only the messages
after the longest kept start (:mod:`phaseaware.chat.prefix_renders`).
"""

from __future__ import annotations

import sys
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Protocol

from phaseaware.chat.messages import Message, check_roles
from phaseaware.chat.prefix_renders import PrefixRenders

__all__ = ["MessageWiseFormat", "render_after_kept"]


class MessageWiseFormat(Protocol):
    """A format whose text is ``opening() + message_text(0, m0) + message_text(1, m1) + ...
    + closing(...)``: each message's text depends on the message and its index only."""

    name: str
    supported_roles: frozenset[str]

    def opening(self) -> str: ...

    def message_text(self, index: int, message: Message) -> str: ...

    def closing(self, *, add_generation_prompt: bool) -> str: ...


@dataclass(frozen=True)
class _Kept:
    """The text of ``messages`` without the closing (a start of every longer render)."""

    messages: tuple[Message, ...]
    text: str


def render_after_kept(
    fmt: MessageWiseFormat, messages: Sequence[Message], *, add_generation_prompt: bool
) -> str:
    """``fmt``'s text of ``messages``, the messages after the longest remembered start only.

    Exact by the format's rule: the text of ``messages[:k]`` before the closing is a
    start of the text of ``messages`` (each message's text depends on the message and
    its index), so a kept text of equal first ``k`` messages (:mod:`~phaseaware.chat.prefix_renders`)
    is followed by the texts of the others. The kept messages passed the role check."""
    messages = tuple(messages)
    key = (type(fmt), fmt.opening())
    kept = _KEPT.longest(key, messages)
    done = 0 if kept is None else len(kept.messages)
    check_roles(messages, chat_format=fmt.name, roles=fmt.supported_roles, start=done)
    text = (fmt.opening() if kept is None else kept.text) + "".join(
        fmt.message_text(i, messages[i]) for i in range(done, len(messages))
    )
    if done < len(messages):
        _KEPT.put(key, _Kept(messages, text))
    return text + fmt.closing(add_generation_prompt=add_generation_prompt)


# by format, opening, length and last message (see prefix_renders)
_KEPT: PrefixRenders[_Kept] = PrefixRenders(
    name="chat.formats kept renders", size_of=lambda kept: sys.getsizeof(kept.text)
)
