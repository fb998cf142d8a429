"""A prompt step's context slot, for frameworks that format their own templates.

The framework formats every template variable itself, and ``{context}`` with a random
marker (:func:`slot_marker`); :func:`~phaseaware.integrate.conversation` splits the
formatted messages at the marker, so braces in the caller's variables stay text.
:func:`fill_slot` assembles the records into that layout and hands back the message
that holds the context, written in; every other message is the framework's as formatted.
"""

from __future__ import annotations

import uuid
from collections.abc import Sequence
from dataclasses import dataclass

from phaseaware.assembly.report.result import AssemblyResult
from phaseaware.chat.layout import ConversationLayout
from phaseaware.integrate.calls import assemble_records
from phaseaware.integrate.records import SourceRecord
from phaseaware.integrate.target import Target

__all__ = ["FilledSlot", "fill_slot", "slot_marker"]


def slot_marker() -> str:
    """A new random marker to format ``{context}`` with (no caller's text holds it)."""
    return f"PHASEAWARE_CONTEXT_{uuid.uuid4().hex}"


@dataclass(frozen=True)
class FilledSlot:
    """One assembly into a slot: the result, the index of the message holding the
    context and that message's new content."""

    result: AssemblyResult
    index: int
    content: str


def fill_slot(
    layout: ConversationLayout,
    records: Sequence[SourceRecord],
    *,
    target: Target,
    question: str,
) -> FilledSlot:
    """Assemble ``records`` into ``layout`` (from :func:`conversation` with a slot marker)
    and write the context into the slot's message."""
    result = assemble_records(records, target=target, layout=layout, question=question)
    slot = layout.slot_index
    filled = layout.filled(context=result.context, question=question)
    return FilledSlot(result, slot, filled[slot].content)
