"""LlamaIndex types as phaseaware's: nodes to records and a plan's nodes back, a text-QA
template to the conversation planned, phaseaware's messages to ``ChatMessage`` objects.

The arranged nodes are :class:`PhaseAwareNode` objects: their ``text`` is one rendered
segment (pad included) and they warn (:class:`RepackWarning`) when a response mode that
repacks text reads them (``get_content(MetadataMode.LLM)``; ``PhaseAwareSynthesizer``
never reads them that way).
"""

from __future__ import annotations

import copy
import warnings
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from llama_index.core.base.llms.types import ChatMessage, MessageRole
from llama_index.core.llms import LLM
from llama_index.core.prompts import BasePromptTemplate
from llama_index.core.prompts.chat_prompts import CHAT_TEXT_QA_PROMPT
from llama_index.core.prompts.default_prompts import DEFAULT_TEXT_QA_PROMPT
from llama_index.core.schema import BaseNode, MetadataMode, NodeWithScore, TextNode

from phaseaware import AssemblyResult
from phaseaware.errors import InputError, PhaseawareWarning
from phaseaware.integrate import (
    SourceRecord,
    Target,
    assemble_records,
    conversation,
    placed_records,
    placement_report,
    tagged_conversation,
)

__all__ = [
    "ASSEMBLY_KEY",
    "PLACEMENT_KEY",
    "PhaseAwareNode",
    "Planned",
    "REPACK_WARNING",
    "RepackWarning",
    "assemble_nodes",
    "default_text_qa_messages",
    "is_chat_llm",
    "node_records",
    "text_qa_conversation",
    "to_chat_messages",
]

PLACEMENT_KEY = "phaseaware_placement"  # metadata: where this chunk landed (its report entry)
ASSEMBLY_KEY = "phaseaware_assembly"  # metadata: the whole plan (one dict shared per call)

REPACK_WARNING = (
    "nodes arranged by PhaseAwarePostprocessor are being read for a response mode that "
    "repacks text (compact, tree_summarize, refine, accumulate, simple_summarize strip, join "
    "and re-split chunks), so the reported placements will not reach the model; pass "
    "response_synthesizer=PhaseAwareSynthesizer(...) to RetrieverQueryEngine, or build the "
    "engine with phaseaware_query_engine(...)"
)


class RepackWarning(PhaseawareWarning):
    """Arranged nodes went to a synthesizer that changes their text."""


class PhaseAwareNode(TextNode):
    """A text node whose ``text`` is one rendered segment (pad included) of a plan."""

    @classmethod
    def class_name(cls) -> str:
        return "PhaseAwareNode"

    @classmethod
    def arranged(
        cls,
        original: BaseNode,
        *,
        text: str,
        placement: Mapping[str, Any],
        assembly: Mapping[str, Any],
    ) -> PhaseAwareNode:
        """A new node for ``original`` (same id, relationships, metadata deep-copied);
        ``text`` is what the LLM sees, so all metadata is hidden from the LLM view."""
        ours = (PLACEMENT_KEY, ASSEMBLY_KEY)
        metadata = {k: copy.deepcopy(v) for k, v in original.metadata.items() if k not in ours}
        metadata[PLACEMENT_KEY] = dict(placement)
        metadata[ASSEMBLY_KEY] = assembly  # one dict shared by the nodes of a call
        embed_hidden = [k for k in original.excluded_embed_metadata_keys if k not in ours]
        fields: dict[str, Any] = {  # field names (pydantic aliases differ: extra_info, ...)
            "id_": original.node_id,
            "text": text,
            "metadata": metadata,
            "excluded_llm_metadata_keys": list(metadata),
            "excluded_embed_metadata_keys": [*embed_hidden, *ours],
            "relationships": copy.deepcopy(original.relationships),
            "metadata_template": original.metadata_template,
            "metadata_separator": original.metadata_separator,
        }
        return cls(**fields)

    def get_content(self, metadata_mode: MetadataMode = MetadataMode.NONE) -> str:
        if metadata_mode == MetadataMode.LLM:
            warnings.warn(REPACK_WARNING, RepackWarning, stacklevel=2)
        return super().get_content(metadata_mode=metadata_mode)


def _node_text(node: BaseNode) -> str:
    """What LlamaIndex would show the LLM for ``node`` (its own metadata header included);
    a node already arranged by phaseaware gives back its text without the pad."""
    placement = node.metadata.get(PLACEMENT_KEY)
    if isinstance(placement, Mapping) and isinstance(node, TextNode):
        pad_chars = int(placement["char_start"]) - int(placement["segment_char_start"])
        return node.text[pad_chars:]
    return node.get_content(metadata_mode=MetadataMode.LLM)


def node_records(nodes: object) -> list[SourceRecord]:
    """One record per node (its LLM view, score, id); ``InputError`` for a non-node."""
    if isinstance(nodes, str | bytes) or not isinstance(nodes, Sequence):
        raise InputError(f"nodes must be a list of NodeWithScore, got {type(nodes).__name__}")
    records = []
    for index, n in enumerate(nodes):
        if not isinstance(n, NodeWithScore) or not isinstance(n.node, BaseNode):
            raise InputError(
                f"nodes[{index}] is a {type(n).__name__}; pass NodeWithScore objects (a "
                "retriever's output)"
            )
        records.append(SourceRecord(text=_node_text(n.node), score=n.score, id=n.node.node_id))
    return records


@dataclass(frozen=True)
class Planned:
    """One assemble call over nodes: the result and the new nodes, in context order."""

    result: AssemblyResult
    nodes: tuple[NodeWithScore, ...]
    conversation_key: str


def assemble_nodes(
    nodes: Sequence[NodeWithScore],
    *,
    target: Target,
    messages: Sequence[Mapping[str, Any]],
    question: str,
) -> Planned:
    """Assemble ``nodes`` into ``messages`` (one ``{context}``): new nodes, in context
    order, each carrying :data:`PLACEMENT_KEY` (its report entry) and :data:`ASSEMBLY_KEY`
    (the whole report plus ``conversation_key``; one dict shared per call). The caller's
    nodes are untouched."""
    records = node_records(nodes)
    layout = conversation(target, messages, question=question)
    result = assemble_records(
        records, target=target, layout=layout, question=question, what="nodes"
    )
    key = target.plan_key(messages, question)
    shared = {**placement_report(result, [r.id for r in records]), "conversation_key": key}
    out = []
    for placed in placed_records(result, shared):
        original = nodes[placed.index]
        node = PhaseAwareNode.arranged(
            original.node, text=placed.segment.text, placement=placed.placement, assembly=shared
        )
        out.append(NodeWithScore(node=node, score=original.score))
    return Planned(result=result, nodes=tuple(out), conversation_key=key)


def is_chat_llm(llm: LLM | None) -> bool:
    """Whether ``llm`` is called with messages (``chat``) rather than a string (``complete``)."""
    return True if llm is None else bool(llm.metadata.is_chat_model)


def _contents(
    template: BasePromptTemplate, llm: LLM | None, context: str, query: str
) -> list[dict[str, str]]:
    """As ``LLM.predict`` formats ``template``: a chat LLM's messages (through its
    ``output_parser``, its ``system_prompt`` first); a completion LLM's one string
    (``system_prompt + "\\n\\n" + text`` in its ``query_wrapper_prompt``)."""
    if is_chat_llm(llm):
        messages = template.format_messages(llm=llm, context_str=context, query_str=query)
        if llm is not None and llm.output_parser is not None:
            messages = llm.output_parser.format_messages(messages)
        if llm is not None and llm.system_prompt:
            messages = [ChatMessage(role=MessageRole.SYSTEM, content=llm.system_prompt), *messages]
        out = []
        for i, message in enumerate(messages):
            if not isinstance(message.content, str):
                raise InputError(f"text QA template message {i} holds no text; use text messages")
            out.append({"role": str(message.role.value), "content": message.content})
        return out
    text = template.format(llm=llm, context_str=context, query_str=query)
    if llm is not None and llm.system_prompt:
        text = llm.system_prompt + "\n\n" + text
    if llm is not None and llm.query_wrapper_prompt is not None:
        text = llm.query_wrapper_prompt.format(query_str=text)
    return [{"role": "user", "content": text}]


def text_qa_conversation(
    template: BasePromptTemplate | None = None, *, llm: LLM | None = None
) -> list[dict[str, str]]:
    """The messages ``llm`` would get from ``template`` (default: LlamaIndex's text QA
    prompt), ``{context}`` and ``{question}`` unfilled; ``InputError`` when its own text
    holds ``{context}``/``{question}``."""
    if template is None:  # what DEFAULT_TEXT_QA_PROMPT_SEL selects for this LLM
        template = CHAT_TEXT_QA_PROMPT if is_chat_llm(llm) else DEFAULT_TEXT_QA_PROMPT
    return tagged_conversation(lambda context, query: _contents(template, llm, context, query))


def default_text_qa_messages() -> list[dict[str, str]]:
    """LlamaIndex's default chat text-QA conversation (its system message, then the user turn)."""
    return text_qa_conversation(None, llm=None)


def to_chat_messages(messages: Any) -> list[ChatMessage]:
    """phaseaware's OpenAI-style message dicts as LlamaIndex ``ChatMessage`` objects."""
    return [ChatMessage(role=MessageRole(m["role"]), content=m["content"]) for m in messages]
