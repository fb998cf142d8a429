"""The node postprocessors: ``PhaseAwarePostprocessor`` (order and pad retrieved nodes as
``phaseaware.assemble`` plans) and ``PhaseAwareReorder`` (order alone).

Use the first with ``PhaseAwareSynthesizer`` (or ``phaseaware_query_engine``): the
built-in response modes repack node text and would move the placements (the nodes warn).
"""

from __future__ import annotations

import asyncio
from typing import Any

from llama_index.core.bridge.pydantic import Field, PrivateAttr
from llama_index.core.postprocessor.types import BaseNodePostprocessor
from llama_index.core.schema import NodeWithScore, QueryBundle
from llama_index.postprocessor.phaseaware.nodes import (
    Planned,
    assemble_nodes,
    default_text_qa_messages,
    node_records,
)

from phaseaware.integrate import (
    AssemblyRequest,
    Target,
    reorder_profile,
    reorder_records,
    resolve_target,
)

__all__ = ["PhaseAwarePostprocessor", "PhaseAwareReorder"]


class PhaseAwarePostprocessor(BaseNodePostprocessor):
    """Arrange nodes so that their evidence key tokens land on reliable residues.

    Returns new nodes in context order: text is each chunk's rendered segment (pad
    included); metadata ``phaseaware_placement`` (its report entry) and
    ``phaseaware_assembly`` (the plan), hidden from LLM and embedding views. Chunks the
    budget cannot hold are left out; the caller's nodes are never changed.
    """

    tokenizer: Any = Field(description="a phaseaware tokenizer spec or Tokenizer")
    chat_format: Any = Field(description="how the server renders messages: hf, chatml, ...")
    profile: Any = Field(None, description="a model name, profile path, Profile or None")
    budget_tokens: int = Field(description="most tokens of the whole prompt")
    options: Any = Field(None, description="AssemblyOptions or a dict of its fields")
    endpoint: Any = Field(None, description="a probe-endpoint record: its offset (set)")
    messages: list[dict[str, str]] | None = Field(
        None, description="the synthesizer's conversation ({context}, {question}); default: "
        "LlamaIndex's chat text-QA prompt",
    )  # fmt: skip

    _target: Target = PrivateAttr()
    _messages: list[dict[str, str]] = PrivateAttr()

    def __init__(self, **data: Any) -> None:
        super().__init__(**data)
        request = AssemblyRequest(
            tokenizer=self.tokenizer, chat_format=self.chat_format, profile=self.profile,
            budget_tokens=self.budget_tokens, options=self.options,
        )  # fmt: skip
        self._target = resolve_target(request, endpoint=self.endpoint)
        messages = self.messages
        self._messages = [dict(m) for m in messages] if messages else default_text_qa_messages()

    @classmethod
    def class_name(cls) -> str:
        return "PhaseAwarePostprocessor"

    @property
    def target(self) -> Target:
        return self._target

    @property
    def conversation(self) -> list[dict[str, str]]:
        """The conversation nodes are assembled into (a copy)."""
        return [dict(m) for m in self._messages]

    def plan(
        self, nodes: list[NodeWithScore], query_bundle: QueryBundle | None = None
    ) -> Planned | None:
        """The whole plan for ``nodes`` (``None`` for no nodes); a missing query is ``""``."""
        if not nodes:
            return None
        question = query_bundle.query_str if query_bundle is not None else ""
        return assemble_nodes(
            nodes, target=self._target, messages=self._messages, question=question
        )

    def _postprocess_nodes(
        self,
        nodes: list[NodeWithScore],
        query_bundle: QueryBundle | None = None,
    ) -> list[NodeWithScore]:
        planned = self.plan(nodes, query_bundle)
        return list(planned.nodes) if planned is not None else []

    async def _apostprocess_nodes(
        self,
        nodes: list[NodeWithScore],
        query_bundle: QueryBundle | None = None,
    ) -> list[NodeWithScore]:
        planned = await asyncio.to_thread(self.plan, list(nodes), query_bundle)
        return list(planned.nodes) if planned is not None else []


class PhaseAwareReorder(BaseNodePostprocessor):
    """A drop-in for ``LongContextReorder``: the same nodes, none dropped or changed, in
    the kit's order (lost in the middle without a profile, phase-aware with one; unscored
    nodes after scored ones, in retrieval order)."""

    profile: Any = Field(
        default=None,
        description="a model name, profile path or Profile; None: lost in the middle",
    )

    _profile: Any = PrivateAttr(default=None)

    def __init__(self, **data: Any) -> None:
        super().__init__(**data)
        self._profile = reorder_profile(self.profile)  # a bad name fails here, not per call

    @classmethod
    def class_name(cls) -> str:
        return "PhaseAwareReorder"

    def _postprocess_nodes(
        self,
        nodes: list[NodeWithScore],
        query_bundle: QueryBundle | None = None,
    ) -> list[NodeWithScore]:
        order = reorder_records(node_records(nodes), profile=self._profile, what="nodes")
        return [nodes[i] for i in order]
