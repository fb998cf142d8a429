"""Where each message's content sits in a rendered conversation (character spans).

Every chat format writes message text verbatim, but some move it (``deepseek-v4``
reorders tool results by call order; ``hf`` templates do what they do). So the
spans are found, not assumed: the conversation is rendered once more with each
non-empty content replaced by a unique marker; each marker must appear once,
and putting the real contents back at the markers must give the real render
(otherwise :class:`~phaseaware.chat.errors.TemplateRewriteError`).
"""

from __future__ import annotations

import uuid
from collections.abc import Sequence
from dataclasses import dataclass

from phaseaware.chat.errors import TemplateRewriteError
from phaseaware.chat.formats import ChatFormat
from phaseaware.chat.messages import Message

__all__ = ["RenderedConversation", "render_with_spans"]


@dataclass(frozen=True)
class RenderedConversation:
    """``text`` of ``messages``; ``spans[i]`` is message ``i``'s content as
    ``text[start:end]`` (``(start, start)`` for an empty content, where its text would go)."""

    text: str
    messages: tuple[Message, ...]
    spans: tuple[tuple[int, int], ...]

    def message_at(self, char: int) -> int | None:
        """Index of the message whose content holds ``text[char]``; ``None``: template text."""
        for i, span in enumerate(self.spans):
            if span[0] <= char < span[1]:
                return i
        return None


def render_with_spans(
    messages: Sequence[Message], chat_format: ChatFormat, *, add_generation_prompt: bool = True
) -> RenderedConversation:
    """Render ``messages`` with ``chat_format`` and locate every message's content."""
    messages = tuple(messages)
    text = chat_format.render(messages, add_generation_prompt=add_generation_prompt)
    tag = uuid.uuid4().hex[:10].upper()
    markers = {i: f"PHASEAWARESPAN{i}X{tag}" for i in range(len(messages))}
    marked = [m.with_content(markers[i]) for i, m in enumerate(messages)]
    marked_text = chat_format.render(marked, add_generation_prompt=add_generation_prompt)
    found: list[tuple[int, int]] = []  # (marker position, message index)
    for i, marker in markers.items():
        count = marked_text.count(marker)
        if count != 1:
            raise TemplateRewriteError(
                f"chat format {chat_format.name!r} writes message {i} ({messages[i].role}) "
                f"{count} times; use chat format chatml or deepseek-v4",
                index=i,
                change="dropped" if count == 0 else "repeated",
            )
        found.append((marked_text.index(marker), i))
    pieces: list[str] = []
    spans: list[tuple[int, int]] = [(0, 0)] * len(messages)
    cursor = length = 0
    for at, i in sorted(found):
        gap = marked_text[cursor:at]
        pieces.append(gap)
        start = length + len(gap)
        content = messages[i].content
        pieces.append(content)
        spans[i] = (start, start + len(content))
        length = start + len(content)
        cursor = at + len(markers[i])
    pieces.append(marked_text[cursor:])
    if "".join(pieces) != text:
        raise TemplateRewriteError(
            f"chat format {chat_format.name!r} changes a message's text as it renders it; "
            "strip leading/trailing whitespace from the messages, or use chat format chatml",
            index=0,
            change="rewritten",
        )
    return RenderedConversation(text=text, messages=messages, spans=tuple(spans))
