"""Haystack ``Document`` and ``ChatMessage`` objects as the kit's records and OpenAI-style
dicts, and back. Inputs are never mutated."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from haystack import Document
from haystack.dataclasses import ChatMessage, ChatRole

import phaseaware.integrate as kit
from phaseaware.errors import InputError

__all__ = ["document_records", "message_dicts", "with_text"]


def document_records(
    documents: object, *, evidence_key: str | None = kit.EVIDENCE_KEY
) -> list[kit.SourceRecord]:
    """One record per document: ``content``, ``score`` (``None``: unscored), ``id`` and
    ``meta[evidence_key]``. A document without text raises ``InputError`` (a
    ``ValueError``, as ``LostInTheMiddleRanker`` raises): only text is placed."""
    if isinstance(documents, str | bytes) or not isinstance(documents, Sequence):
        raise InputError(
            f"documents must be a list of haystack Document objects, got {type(documents).__name__}"
        )
    records = []
    for index, doc in enumerate(documents):
        if not isinstance(doc, Document):
            raise InputError(
                f"documents[{index}] is a {type(doc).__name__}; pass haystack Document objects "
                "(a retriever's output)"
            )
        if doc.content is None:
            raise InputError(
                f"documents[{index}] (id {doc.id!r}) holds no text; phaseaware places text "
                "documents only: convert it to text first, or leave it out"
            )
        evidence = doc.meta.get(evidence_key) if evidence_key is not None else None
        records.append(kit.SourceRecord(doc.content, doc.score, doc.id, evidence))
    return records


def message_dicts(messages: Sequence[ChatMessage]) -> list[dict[str, Any]]:
    """The messages as ``OpenAIChatGenerator`` sends them (``to_openai_dict_format``),
    kept to what a chat template reads: role, text content, tool calls, tool call id."""
    out = []
    for index, message in enumerate(messages):
        if not isinstance(message, ChatMessage):
            raise InputError(
                f"message {index} is a {type(message).__name__}; pass haystack ChatMessage objects"
            )
        sent = message.to_openai_dict_format(require_tool_call_ids=False)
        content = sent.get("content")
        item: dict[str, Any] = {
            "role": sent["role"],
            "content": kit.content_text(content or "", where=f"message {index}"),
        }
        for key in ("tool_calls", "tool_call_id"):
            if key in sent:
                item[key] = sent[key]
        out.append(item)
    return out


def with_text(message: ChatMessage, text: str) -> ChatMessage:
    """A new message like ``message`` (role, name, meta) holding ``text`` only."""
    meta = dict(message.meta)
    if message.is_from(ChatRole.SYSTEM):
        return ChatMessage.from_system(text, meta=meta, name=message.name)
    if message.is_from(ChatRole.USER):
        return ChatMessage.from_user(text, meta=meta, name=message.name)
    raise InputError(
        f"the documents slot is in a {message.role.value} message; put it in a system or "
        "user message"
    )
