"""LangChain types to and from phaseaware's (documents as records, messages as OpenAI-style
dicts, bound tools as schemas); nothing here plans or decides. Inputs are never mutated."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from langchain_core.documents import Document
from langchain_core.messages import (
    AIMessage,
    BaseMessage,
    ChatMessage,
    HumanMessage,
    SystemMessage,
    ToolMessage,
)

import phaseaware.integrate as kit
from phaseaware import Chunk
from phaseaware.errors import InputError

SCORE_KEYS = kit.SCORE_KEYS  # metadata keys of the score, first found wins

__all__ = [
    "SCORE_KEYS",
    "document_chunks",
    "document_records",
    "message_dict",
    "message_dicts",
    "message_text",
    "served_identity",
    "tool_schemas",
]


def document_records(
    documents: object,
    *,
    score_keys: Sequence[str] = SCORE_KEYS,
    evidence_key: str | None = kit.EVIDENCE_KEY,
) -> list[kit.SourceRecord]:
    """One record per document (score: the first of ``score_keys`` in the metadata)."""
    if isinstance(documents, str | bytes) or not isinstance(documents, Sequence):
        raise InputError(
            f"documents must be a list of langchain Document objects, "
            f"got {type(documents).__name__}"
        )
    records = []
    for index, doc in enumerate(documents):
        if not isinstance(doc, Document):
            raise InputError(
                f"documents[{index}] is a {type(doc).__name__}; pass langchain_core Document "
                "objects (a retriever's output)"
            )
        record = kit.metadata_record(
            doc.page_content, doc.metadata, id=doc.id, where=f"documents[{index}]",
            score_keys=score_keys, evidence_key=evidence_key,
        )  # fmt: skip
        records.append(record)
    return records


def document_chunks(
    documents: Sequence[Document],
    *,
    score_keys: Sequence[str] = SCORE_KEYS,
    evidence_key: str | None = kit.EVIDENCE_KEY,
) -> list[Chunk]:
    """One chunk per document, ids ``doc-<index>`` (the kit's rules)."""
    records = document_records(documents, score_keys=score_keys, evidence_key=evidence_key)
    return kit.record_chunks(records, what="documents")


def message_text(message: BaseMessage, index: int) -> str:
    """The message's text; list content must consist of text parts only."""
    return kit.content_text(message.content, where=f"message {index}")


def message_dict(message: BaseMessage, index: int = 0) -> dict[str, Any]:
    """One LangChain message as an OpenAI-style dict (``role``, ``content``, tool fields)."""
    text = message_text(message, index)
    if isinstance(message, SystemMessage):
        return {"role": "system", "content": text}
    if isinstance(message, HumanMessage):
        return {"role": "user", "content": text}
    if isinstance(message, AIMessage):
        out: dict[str, Any] = {"role": "assistant", "content": text}
        if message.tool_calls or message.invalid_tool_calls:  # as ChatOpenAI sends them
            out["tool_calls"] = [
                kit.tool_call_dict(c.get("id"), c["name"], c.get("args", {}), ensure_ascii=False)
                for c in message.tool_calls
            ] + [_invalid_call_dict(c) for c in message.invalid_tool_calls]
        return out
    if isinstance(message, ToolMessage):
        return {"role": "tool", "content": text, "tool_call_id": message.tool_call_id}
    if isinstance(message, ChatMessage) and message.role in kit.ROLES:
        return {"role": message.role, "content": text}
    raise InputError(
        f"message {index} is a {type(message).__name__} (type {message.type!r}); use system, "
        "human, ai or tool messages"
    )


def _invalid_call_dict(call: Mapping[str, Any]) -> dict[str, Any]:
    """An ``invalid_tool_call`` (arguments that are not JSON, as the model wrote them) as
    ``ChatOpenAI`` sends it, after the valid calls: the kit judges it as any malformed call
    (its result unaligned; under ``control_tokens="refuse"``, refused if it holds a control
    string)."""
    function = {"name": call.get("name"), "arguments": call.get("args")}
    return {"id": call.get("id"), "type": "function", "function": function}


def tool_schemas(tools: Sequence[Any] | None) -> list[dict[str, Any]]:
    """Bound tools as the OpenAI schemas the request sends (LangChain's own conversion)."""
    from langchain_core.utils.function_calling import convert_to_openai_tool

    return [convert_to_openai_tool(t) for t in tools or ()]


def message_dicts(messages: Sequence[BaseMessage]) -> list[dict[str, Any]]:
    return [message_dict(m, i) for i, m in enumerate(messages)]


def served_identity(metadata: Mapping[str, Any] | None) -> tuple[str | None, str | None]:
    """``(model, system_fingerprint)`` in a message's ``response_metadata`` or an
    ``llm_output`` (``ChatOpenAI``'s ``model_name``); ``None`` for what is absent or empty."""
    if not isinstance(metadata, Mapping):
        return None, None
    model = metadata.get("model_name", metadata.get("model"))
    return kit.reported_identity({**metadata, "model": model})
