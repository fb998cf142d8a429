"""``PhaseAwareNode``: an arranged node that warns when a repacking response mode reads it.

Built-in response modes read nodes with ``get_content(MetadataMode.LLM)`` and then change
the text; ``PhaseAwareSynthesizer`` never reads them that way. So an LLM-mode read means
the placements are about to be lost.
"""

from __future__ import annotations

import copy
import warnings
from collections.abc import Mapping
from typing import Any

from llama_index.core.schema import BaseNode, MetadataMode, TextNode

from phaseaware.errors import PhaseawareWarning

__all__ = ["ASSEMBLY_KEY", "PLACEMENT_KEY", "PhaseAwareNode", "REPACK_WARNING", "RepackWarning"]

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
        metadata = {
            k: copy.deepcopy(v)
            for k, v in original.metadata.items()
            if k not in (PLACEMENT_KEY, ASSEMBLY_KEY)
        }
        metadata[PLACEMENT_KEY] = dict(placement)
        metadata[ASSEMBLY_KEY] = assembly  # one dict shared by the nodes of a call
        embed_hidden = [
            k
            for k in original.excluded_embed_metadata_keys
            if k not in (PLACEMENT_KEY, ASSEMBLY_KEY)
        ]
        fields: dict[str, Any] = {  # field names (pydantic aliases differ: extra_info, ...)
            "id_": original.node_id,
            "text": text,
            "metadata": metadata,
            "excluded_llm_metadata_keys": list(metadata),
            "excluded_embed_metadata_keys": [*embed_hidden, PLACEMENT_KEY, ASSEMBLY_KEY],
            "relationships": copy.deepcopy(original.relationships),
            "metadata_template": original.metadata_template,
            "metadata_separator": original.metadata_separator,
        }
        return cls(**fields)

    def get_content(self, metadata_mode: MetadataMode = MetadataMode.NONE) -> str:
        if metadata_mode == MetadataMode.LLM:
            warnings.warn(REPACK_WARNING, RepackWarning, stacklevel=2)
        return super().get_content(metadata_mode=metadata_mode)
