"""Message contents are user strings: break their control tokens before rendering.

``clean_template`` runs every text part of every message (and each message's
``reasoning_content``) through a :class:`~phaseaware.tokenizers.control.ControlScanner`;
placeholders are left alone. Offsets in the returned ``Neutralized`` records are
character offsets in the message's content as written (placeholders spelt out).
Tool-call arguments are JSON the format renders as data and are not scanned.
"""

from __future__ import annotations

from dataclasses import replace

from phaseaware.chat.messages import ConversationTemplate, Part, Placeholder
from phaseaware.tokenizers.control import ControlScanner, Neutralized

__all__ = ["clean_template"]


def clean_template(
    template: ConversationTemplate, scanner: ControlScanner
) -> tuple[ConversationTemplate, tuple[Neutralized, ...]]:
    """(the template with control strings broken, what was broken); new objects."""
    found: list[Neutralized] = []
    messages = []
    all_parts: list[list[Part]] = []
    for index, (message, parts) in enumerate(zip(template.messages, template.parts, strict=True)):
        where = f"messages[{index}]"
        cleaned: list[Part] = []
        offset = 0
        for part in parts:
            if isinstance(part, Placeholder):
                cleaned.append(part)
                offset += len(part.value)
                continue
            text, hits = scanner.clean(part, where=where)
            found.extend(replace(h, offset=h.offset + offset) for h in hits)
            cleaned.append(text)
            offset += len(part)
        if message.reasoning_content:
            reasoning, hits = scanner.clean(
                message.reasoning_content, where=f"{where}.reasoning_content"
            )
            found.extend(hits)
            message = replace(message, reasoning_content=reasoning)
        messages.append(message)
        all_parts.append(cleaned)
    if not found:
        return template, ()
    return ConversationTemplate.from_parts(messages, all_parts), tuple(found)
