"""LlamaIndex nodes <-> phaseaware chunks, and one assemble call over a conversation.

Framework-neutral where it can be: :class:`PlanConfig` resolves specs once
(tokenizer, profile, options); :func:`assemble_nodes` turns retrieved nodes into
``phaseaware.Chunk`` objects, assembles them into the conversation the
synthesizer will send, and returns new nodes (never the caller's) whose text is
each chunk's rendered segment, pad included, in context order.

Metadata keys written on every returned node (both hidden from the LLM and from
embeddings): :data:`PLACEMENT_KEY` (where this chunk landed, measured) and
:data:`ASSEMBLY_KEY` (the whole plan: the messages to send, the prompt, its token
count; one shared dict per call).
"""

from __future__ import annotations

import hashlib
import json
import os
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, fields
from typing import Any

from llama_index.core.schema import BaseNode, MetadataMode, NodeWithScore, TextNode

from phaseaware.assembly import AssemblyOptions, AssemblyResult, Chunk, assemble
from phaseaware.assembly.report.result import Placement
from phaseaware.chat import conversation_layout
from phaseaware.endpoints import EndpointRecord, EndpointRef, endpoint_options, load_endpoint
from phaseaware.errors import InputError
from phaseaware.profiles.model import Profile
from phaseaware.profiles.registry import get_profile
from phaseaware.serialize import to_plain
from phaseaware.tokenizers import load_tokenizer
from phaseaware.tokenizers.base import Tokenizer

__all__ = [
    "ASSEMBLY_KEY",
    "PLACEMENT_KEY",
    "PlanConfig",
    "Planned",
    "assemble_nodes",
    "chunk_scores",
    "conversation_key",
    "resolve_options",
]

PLACEMENT_KEY = "phaseaware_placement"
ASSEMBLY_KEY = "phaseaware_assembly"
REPORT_KEYS = (PLACEMENT_KEY, ASSEMBLY_KEY)


def resolve_options(options: AssemblyOptions | Mapping[str, Any] | None) -> AssemblyOptions:
    """``AssemblyOptions`` from an instance, a dict of its fields, or ``None`` (defaults)."""
    if options is None:
        return AssemblyOptions()
    if isinstance(options, AssemblyOptions):
        return options
    if isinstance(options, Mapping):
        known = {f.name for f in fields(AssemblyOptions)}
        unknown = sorted(set(options) - known)
        if unknown:
            raise InputError(f"unknown options {unknown}; known options: {sorted(known)}")
        return AssemblyOptions(**dict(options))
    raise InputError(
        f"options must be a phaseaware.AssemblyOptions or a dict, got {type(options).__name__}"
    )


@dataclass(frozen=True)
class PlanConfig:
    """Everything one assemble call needs besides the chunks, resolved once."""

    tokenizer: Tokenizer
    chat_format: str
    profile: Profile | None
    budget_tokens: int
    options: AssemblyOptions  # the endpoint record's offset (or offset set) applied
    endpoint: EndpointRecord | None = None

    @classmethod
    def resolve(
        cls,
        *,
        tokenizer: str | Tokenizer,
        chat_format: str,
        profile: str | os.PathLike[str] | Profile | None,
        budget_tokens: int,
        options: AssemblyOptions | Mapping[str, Any] | None,
        endpoint: EndpointRef = None,
    ) -> PlanConfig:
        """Load a tokenizer spec and a profile name/path; check the budget and options.

        ``endpoint`` (an ``EndpointRecord``, a record path or ``{"base_url", "model"}``)
        sets the offset (constant record) or the offset set (varying record: robust
        placement); ``FingerprintMismatchError`` for a record of another tokenizer,
        ``InputError`` when ``options`` name an offset that disagrees with it.
        """
        tok = load_tokenizer(tokenizer) if isinstance(tokenizer, str) else tokenizer
        if isinstance(profile, str | os.PathLike):
            prof: Profile | None = get_profile(profile)
        elif profile is None or isinstance(profile, Profile):
            prof = profile
        else:
            raise InputError(
                f"profile must be a model name, a profile file path or a Profile, got "
                f"{type(profile).__name__}"
            )
        if isinstance(budget_tokens, bool) or not isinstance(budget_tokens, int):
            raise InputError(f"budget_tokens must be an integer, got {budget_tokens!r}")
        if not isinstance(chat_format, str):
            raise InputError(f"chat_format must be a string, got {chat_format!r}")
        record = load_endpoint(endpoint)
        resolved = endpoint_options(resolve_options(options), record, tok)
        return cls(tok, chat_format, prof, budget_tokens, resolved, record)


def conversation_key(
    config: PlanConfig, messages: Sequence[Mapping[str, Any]], question: str
) -> str:
    """A digest of what decides the prompt besides the chunks (same key: same frame)."""
    doc = {
        "tokenizer": config.tokenizer.spec,
        "fingerprint": config.tokenizer.fingerprint(),
        "chat_format": config.chat_format,
        "messages": [dict(m) for m in messages],
        "question": question,
        "profile": config.profile.model if config.profile is not None else None,
        "budget_tokens": config.budget_tokens,
        "options": repr(config.options),
    }
    return hashlib.sha256(json.dumps(doc, sort_keys=True).encode()).hexdigest()


def chunk_scores(scores: Sequence[float | None]) -> list[float]:
    """Relevance for every node: its score, or below every real score in retrieval order.

    ``None`` scores (a keyword retriever, a list of nodes) keep the retriever's
    order among themselves and rank after every scored node.
    """
    real = [s for s in scores if s is not None]
    floor = (min(real) if real else 0.0) - 1.0
    n = max(1, len(scores))
    return [float(s) if s is not None else floor - i / n for i, s in enumerate(scores)]


def _chunk_text(node: BaseNode) -> str:
    """What LlamaIndex would show the LLM for ``node`` (its own metadata header included);
    a node already arranged by phaseaware gives back its text without the pad."""
    placement = node.metadata.get(PLACEMENT_KEY)
    if isinstance(placement, Mapping) and isinstance(node, TextNode):
        pad_chars = int(placement["char_start"]) - int(placement["segment_char_start"])
        return node.text[pad_chars:]
    return node.get_content(metadata_mode=MetadataMode.LLM)


def _placement_report(placement: Placement, *, robust: bool) -> dict[str, Any]:
    """``robust``: planned over an offset set, so no single residue is known (``None``)."""
    return {
        "chunk_id": placement.chunk_id,
        "order": placement.order,
        "rank": placement.rank,
        "score": placement.score,
        "padding_tokens": placement.padding_tokens,
        "token_start": placement.token_start,
        "token_end": placement.token_end,
        "char_start": placement.char_start,
        "char_end": placement.char_end,
        "segment_char_start": placement.segment_char_start,
        "key_token_positions": list(placement.key_token_positions),
        "key_char_offsets": list(placement.key_char_offsets),
        "residues": None if robust else list(placement.residues),
        "expected_accuracy": placement.expected_accuracy,
    }


def _assembly_report(result: AssemblyResult, key: str) -> dict[str, Any]:
    return {
        "conversation_key": key,
        "chunk_ids": [p.chunk_id for p in result.placements],
        "messages": [dict(m) for m in result.messages] if result.messages is not None else None,
        "prompt": result.prompt,
        "token_count": result.token_count,
        "position_offset": result.position_offset,
        "offsets": list(result.robust.offsets) if result.robust is not None else None,
        "robust": to_plain(result.robust) if result.robust is not None else None,
        "tokenizer": result.tokenizer,
        "layout": result.layout,
        "profile": result.profile,
        "period": result.period,
        "padding_tokens": result.padding_tokens,
        "repeated_tokens": result.repeated_tokens,
        "expected_accuracy": result.expected_accuracy,
        "naive_expected_accuracy": result.naive_expected_accuracy,
        "dropped": [{"chunk_id": d.chunk_id, "reason": d.reason} for d in result.dropped],
    }


@dataclass(frozen=True)
class Planned:
    """One assemble call over nodes: the result and the new nodes, in context order."""

    result: AssemblyResult
    nodes: tuple[NodeWithScore, ...]
    conversation_key: str


def assemble_nodes(
    nodes: Sequence[NodeWithScore],
    *,
    config: PlanConfig,
    messages: Sequence[Mapping[str, Any]],
    question: str,
) -> Planned:
    """Assemble ``nodes`` into ``messages`` (one ``{context}``) and return new nodes.

    Node ids become chunk ids. The caller's nodes and their metadata are not
    touched: every returned node is a new :class:`PhaseAwareNode`.
    """
    from llama_index.postprocessor.phaseaware.nodes import PhaseAwareNode

    scores = chunk_scores([n.score for n in nodes])
    chunks = [
        Chunk(text=_chunk_text(n.node), score=s, id=n.node.node_id)
        for n, s in zip(nodes, scores, strict=True)
    ]
    layout = conversation_layout(
        tokenizer=config.tokenizer, chat_format=config.chat_format, messages=list(messages)
    )
    result = assemble(
        chunks,
        tokenizer=config.tokenizer,
        chat_format=layout,
        question=question,
        profile=config.profile,
        budget_tokens=config.budget_tokens,
        options=config.options,
    )
    key = conversation_key(config, messages, question)
    shared = _assembly_report(result, key)
    by_id = {n.node.node_id: n for n in nodes}
    out = []
    for placement, segment in zip(result.placements, result.segments, strict=True):
        original = by_id[placement.chunk_id]
        out.append(
            NodeWithScore(
                node=PhaseAwareNode.arranged(
                    original.node,
                    text=segment.text,
                    placement=_placement_report(placement, robust=result.robust is not None),
                    assembly=shared,
                ),
                score=original.score,
            )
        )
    return Planned(result=result, nodes=tuple(out), conversation_key=key)
