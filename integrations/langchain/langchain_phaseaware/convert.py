"""LangChain types to and from phaseaware types; nothing here plans or scores.

- :func:`document_chunks`: ``Document`` objects as :class:`phaseaware.Chunk` objects
  (score from a metadata key, else retrieval order; evidence from a metadata key).
  Chunk ids are ``doc-<index>`` (the input index), so duplicate or missing
  ``Document.id`` values never collide; :func:`document_index` maps them back.
- :func:`message_dict` / :func:`message_dicts`: LangChain messages as the
  OpenAI-style dicts phaseaware's chat layer parses (text content only).
- :func:`resolve_tokenizer`, :func:`resolve_chat_format`, :func:`resolve_profile`,
  :func:`resolve_options`: the constructor arguments of every component, checked once;
  :func:`resolve_target` all of them (and the endpoint) for the prompt and the middleware.

The caller's objects are never mutated: chunks copy what they need.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from dataclasses import fields
from pathlib import Path
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

from phaseaware.assembly.inputs.chunks import Chunk
from phaseaware.assembly.inputs.options import AssemblyOptions
from phaseaware.chat.formats import ChatFormat, get_chat_format
from phaseaware.chat.messages import ROLES
from phaseaware.endpoints import EndpointRecord, EndpointRef, endpoint_options, load_endpoint
from phaseaware.errors import InputError
from phaseaware.profiles.io import load_profile
from phaseaware.profiles.model import Profile
from phaseaware.profiles.registry import get_profile
from phaseaware.tokenizers import load_tokenizer
from phaseaware.tokenizers.base import Tokenizer

__all__ = [
    "CHUNK_ID_PREFIX",
    "document_chunks",
    "document_index",
    "message_dict",
    "message_dicts",
    "message_text",
    "resolve_chat_format",
    "resolve_options",
    "resolve_profile",
    "resolve_target",
    "resolve_tokenizer",
]

CHUNK_ID_PREFIX = "doc-"


def resolve_tokenizer(tokenizer: str | Tokenizer) -> Tokenizer:
    """A tokenizer from a phaseaware spec (``"deepseek-v4"``, ``"hf:/path"``, ...) or object."""
    return load_tokenizer(tokenizer) if isinstance(tokenizer, str) else tokenizer


def resolve_chat_format(
    chat_format: str | ChatFormat, tokenizer: Tokenizer, *, thinking: bool = False
) -> ChatFormat:
    """A chat format by name (``deepseek-v4``, ``chatml``, ``hf``, ``none``) or object."""
    if isinstance(chat_format, str):
        return get_chat_format(chat_format, tokenizer, thinking=thinking)
    if not isinstance(chat_format, ChatFormat):
        raise InputError(
            f"chat_format must be a name (deepseek-v4, chatml, hf, none) or a ChatFormat, "
            f"got {type(chat_format).__name__}"
        )
    return chat_format


def resolve_profile(profile: str | Path | Profile | None) -> Profile | None:
    """A profile from a model name, a profile file path, a ``Profile`` or ``None``."""
    if profile is None or isinstance(profile, Profile):
        return profile
    if isinstance(profile, Path) or (
        isinstance(profile, str) and (profile.endswith(".json") or Path(profile).is_file())
    ):
        return load_profile(Path(profile))
    if isinstance(profile, str):
        return get_profile(profile)
    raise InputError(
        f"profile must be a model name, a profile file path or a Profile, "
        f"got {type(profile).__name__}"
    )


def resolve_options(
    options: AssemblyOptions | Mapping[str, Any] | None, *, position_offset: int | None = None
) -> AssemblyOptions:
    """``AssemblyOptions`` from an object, a mapping of its fields, or ``None`` (defaults);
    ``position_offset`` (tokens the server adds before the prompt) overrides the field."""
    if options is None:
        options = AssemblyOptions()
    elif isinstance(options, Mapping):
        known = {f.name for f in fields(AssemblyOptions)}
        unknown = sorted(set(options) - known)
        if unknown:
            raise InputError(f"unknown options {unknown}; known options: {sorted(known)}")
        options = AssemblyOptions(**dict(options))
    elif not isinstance(options, AssemblyOptions):
        raise InputError(
            f"options must be an AssemblyOptions or a dict, got {type(options).__name__}"
        )
    if position_offset is not None and position_offset != options.position_offset:
        fields_now = {f.name: getattr(options, f.name) for f in fields(AssemblyOptions)}
        options = AssemblyOptions(**{**fields_now, "position_offset": position_offset})
    return options


def resolve_target(
    *,
    tokenizer: str | Tokenizer,
    chat_format: str | ChatFormat,
    thinking: bool,
    profile: str | Path | Profile | None,
    endpoint: EndpointRef,
    options: AssemblyOptions | Mapping[str, Any] | None,
    position_offset: int | None,
) -> tuple[Tokenizer, ChatFormat, Profile | None, EndpointRecord | None, AssemblyOptions]:
    """Tokenizer, chat format, profile, endpoint record and the endpoint's options, in that
    order (the shared constructor arguments of ``PhaseAwarePrompt`` and the middleware)."""
    tok = resolve_tokenizer(tokenizer)
    fmt = resolve_chat_format(chat_format, tok, thinking=thinking)
    prof = resolve_profile(profile)
    record = load_endpoint(endpoint)
    resolved = endpoint_options(
        resolve_options(options, position_offset=position_offset), record, tok
    )
    return tok, fmt, prof, record, resolved


def _score(doc: Document, index: int, count: int, score_keys: Sequence[str]) -> float:
    for key in score_keys:
        value = doc.metadata.get(key)
        if value is None:
            continue
        if isinstance(value, bool) or not isinstance(value, int | float):
            raise InputError(
                f"documents[{index}].metadata[{key!r}] must be a number, got {value!r}; "
                "fix the retriever's score or pass score_keys=() to rank by retrieval order"
            )
        return float(value)
    return float(count - index)  # retrieval order: the first document is the most relevant


def _evidence(doc: Document, index: int, evidence_key: str | None) -> tuple[str, ...]:
    if evidence_key is None:
        return ()
    value = doc.metadata.get(evidence_key)
    if value is None:
        return ()
    if isinstance(value, str):
        return (value,)
    if isinstance(value, list | tuple) and all(isinstance(v, str) for v in value):
        return tuple(value)
    raise InputError(
        f"documents[{index}].metadata[{evidence_key!r}] must be a string or a list of strings, "
        f"got {value!r}"
    )


def document_chunks(
    documents: Sequence[Document],
    *,
    score_keys: Sequence[str] = ("score", "relevance_score"),
    evidence_key: str | None = "evidence",
) -> list[Chunk]:
    """One chunk per document, in input order (see the module docstring for the rules).

    A score missing from every key in ``score_keys`` ranks the document by
    retrieval order (the first one highest); ``score_keys=()`` always does.
    """
    if isinstance(documents, str | bytes) or not isinstance(documents, Sequence):
        raise InputError(
            f"documents must be a list of langchain Document objects, "
            f"got {type(documents).__name__}"
        )
    chunks = []
    for index, doc in enumerate(documents):
        if not isinstance(doc, Document):
            raise InputError(
                f"documents[{index}] is a {type(doc).__name__}; pass langchain_core Document "
                "objects (a retriever's output)"
            )
        chunks.append(
            Chunk(
                text=doc.page_content,
                score=_score(doc, index, len(documents), score_keys),
                id=f"{CHUNK_ID_PREFIX}{index}",
                evidence=_evidence(doc, index, evidence_key),
            )
        )
    return chunks


def document_index(chunk_id: str) -> int:
    """The input index of the document behind chunk ``chunk_id`` (``doc-<index>``)."""
    if not chunk_id.startswith(CHUNK_ID_PREFIX):
        raise InputError(f"chunk id {chunk_id!r} was not made by document_chunks")
    return int(chunk_id[len(CHUNK_ID_PREFIX) :])


def message_text(message: BaseMessage, index: int) -> str:
    """The message's text; list content must consist of text parts only."""
    content = message.content
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
                f"message {index} holds a non-text content part ({part!r}); only text can be "
                "placed exactly: send images and files in a message without {context}"
            )
    return "".join(texts)


def _tool_calls(message: AIMessage) -> list[dict[str, Any]]:
    return [
        {
            "id": call.get("id"),
            "type": "function",
            "function": {
                "name": call["name"],
                "arguments": json.dumps(call.get("args", {}), ensure_ascii=False),
            },
        }
        for call in message.tool_calls
    ]


def message_dict(message: BaseMessage, index: int = 0) -> dict[str, Any]:
    """One LangChain message as an OpenAI-style dict (``role``, ``content``, tool fields)."""
    text = message_text(message, index)
    if isinstance(message, SystemMessage):
        return {"role": "system", "content": text}
    if isinstance(message, HumanMessage):
        return {"role": "user", "content": text}
    if isinstance(message, AIMessage):
        out: dict[str, Any] = {"role": "assistant", "content": text}
        if message.tool_calls:
            out["tool_calls"] = _tool_calls(message)
        return out
    if isinstance(message, ToolMessage):
        return {"role": "tool", "content": text, "tool_call_id": message.tool_call_id}
    if isinstance(message, ChatMessage) and message.role in ROLES:
        return {"role": message.role, "content": text}
    raise InputError(
        f"message {index} is a {type(message).__name__} (type {message.type!r}); use system, "
        "human, ai or tool messages"
    )


def message_dicts(messages: Sequence[BaseMessage]) -> list[dict[str, Any]]:
    """Every message as :func:`message_dict` gives it."""
    return [message_dict(m, i) for i, m in enumerate(messages)]
