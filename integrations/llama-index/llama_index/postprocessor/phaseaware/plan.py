"""LlamaIndex nodes to phaseaware records, and the nodes of one plan back.

The kit plans, reports and checks; :func:`assemble_nodes` returns new nodes in context
order, each carrying :data:`PLACEMENT_KEY` (its report entry) and :data:`ASSEMBLY_KEY`
(the whole report plus ``conversation_key``; one dict shared per call).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from llama_index.core.schema import BaseNode, MetadataMode, NodeWithScore, TextNode
from llama_index.postprocessor.phaseaware.nodes import ASSEMBLY_KEY, PLACEMENT_KEY, PhaseAwareNode

from phaseaware import AssemblyResult
from phaseaware.errors import InputError
from phaseaware.integrate import (
    SourceRecord,
    Target,
    assemble_records,
    conversation,
    placed_records,
    placement_report,
)

__all__ = ["ASSEMBLY_KEY", "PLACEMENT_KEY", "Planned", "assemble_nodes", "node_records"]


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
    """Assemble ``nodes`` into ``messages`` (one ``{context}``); new nodes, the caller's
    untouched."""
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
