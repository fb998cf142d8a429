"""``PhaseAwareReorder``: a drop-in for ``LongContextReorder`` (a node postprocessor): the
same nodes, none dropped or changed, in the kit's order (lost in the middle without a
profile, phase-aware with one; unscored nodes after scored ones, in retrieval order)."""

from __future__ import annotations

from typing import Any

from llama_index.core.bridge.pydantic import Field, PrivateAttr
from llama_index.core.postprocessor.types import BaseNodePostprocessor
from llama_index.core.schema import NodeWithScore, QueryBundle
from llama_index.postprocessor.phaseaware.plan import node_records

from phaseaware.integrate import reorder_profile, reorder_records

__all__ = ["PhaseAwareReorder"]


class PhaseAwareReorder(BaseNodePostprocessor):
    """Reorder nodes: lost in the middle without a profile, phase-aware with one."""

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
