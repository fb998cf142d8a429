"""Framework values read one way for every adapter: message content, tool calls, metadata.

An adapter hands in what its framework holds, already taken out of its own types: a
message's content (a string, or OpenAI-style content parts), a tool call's id, name and
arguments, a document's metadata dict. These functions turn them into the values the kit
takes (message text, OpenAI tool-call dicts, :class:`~phaseaware.integrate.SourceRecord`),
with the errors that say what to pass instead. Inputs are never mutated.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from typing import Any

from phaseaware.errors import InputError
from phaseaware.integrate.records import SourceRecord

__all__ = ["EVIDENCE_KEY", "SCORE_KEYS", "content_text", "metadata_record", "tool_call_dict"]

SCORE_KEYS = ("score", "relevance_score")  # metadata keys of a retriever's score, in order
EVIDENCE_KEY = "evidence"  # metadata key of the evidence strings


def content_text(content: str | Sequence[object], *, where: str) -> str:
    """The text of a message's ``content``: a string, or a list of strings and
    ``{"type": "text", "text": ...}`` parts, joined. Any other part (an image, a file)
    raises ``InputError`` naming ``where`` (``"message 3"``): only text is placed exactly."""
    if isinstance(content, str):
        return content
    texts: list[str] = []
    for part in content:
        if isinstance(part, str):
            texts.append(part)
        elif isinstance(part, Mapping) and part.get("type") == "text":
            texts.append(str(part.get("text", "")))
        else:
            raise InputError(
                f"{where} holds a non-text content part ({part!r}); only text can be "
                "placed exactly: send images and files in a message without {context}"
            )
    return "".join(texts)


def tool_call_dict(
    call_id: object, name: str, arguments: str | Mapping[str, Any], *, ensure_ascii: bool = True
) -> dict[str, Any]:
    """One assistant tool call as an OpenAI-style dict. ``arguments``: its JSON text, or
    a mapping serialized as the framework's client serializes it (``ensure_ascii``)."""
    if not isinstance(arguments, str):
        arguments = json.dumps(arguments, ensure_ascii=ensure_ascii)
    return {
        "id": call_id,
        "type": "function",
        "function": {"name": name, "arguments": arguments},
    }


def metadata_record(
    text: object,
    metadata: object,
    *,
    id: object = None,
    score_keys: Sequence[str] = SCORE_KEYS,
    evidence_key: str | None = EVIDENCE_KEY,
    where: str,
) -> SourceRecord:
    """One record from a document's text and metadata: its score is the first of
    ``score_keys`` whose value is not ``None`` (none: unscored), its evidence
    ``metadata[evidence_key]`` (``evidence_key=None``: none). ``None`` metadata is empty;
    any other non-mapping raises ``InputError`` naming ``where`` (``"documents[3]"``)."""
    metadata = {} if metadata is None else metadata
    if not isinstance(metadata, Mapping):
        raise InputError(f"{where}.metadata is a {type(metadata).__name__}; pass a dict (or none)")
    score = next((metadata[k] for k in score_keys if metadata.get(k) is not None), None)
    evidence = metadata.get(evidence_key) if evidence_key is not None else None
    return SourceRecord(text, score, id, evidence)
