"""LlamaIndex nodes to phaseaware records, and the nodes of one plan back.

Planning, the missing-score rule, the report and the checks are
:mod:`phaseaware.integrate`'s; this module converts types. :func:`assemble_nodes`
returns new nodes (never the caller's) whose text is each chunk's rendered
segment, pad included, in context order.

Metadata keys written on every returned node (both hidden from the LLM and from
embeddings): :data:`PLACEMENT_KEY` (where this chunk landed, measured: its entry
of the placement report) and :data:`ASSEMBLY_KEY` (the whole report,
``AssemblyResult.to_dict()`` with each node's index and id, plus the
``conversation_key``; one shared dict per call).
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
    """One record per node (its LLM view, its score or ``None``, its id); ``InputError``
    for anything that is not a ``NodeWithScore`` over a node."""
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
    """Assemble ``nodes`` into ``messages`` (one ``{context}``) and return new nodes.

    The caller's nodes and their metadata are not touched: every returned node is
    a new :class:`PhaseAwareNode`.
    """
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
