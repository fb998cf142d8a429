"""phaseaware for LlamaIndex: phase-aware node arrangement and a synthesis path that keeps it.

The agent LLM wrapper is its own package, as LlamaIndex ships LLMs:
``llama-index-llms-phaseaware`` (``from llama_index.llms.phaseaware import PhaseAwareAgentLLM``).
"""

from typing import Any

from llama_index.postprocessor.phaseaware.postprocessor import (
    ASSEMBLY_KEY,
    PLACEMENT_KEY,
    PhaseAwareNode,
    PhaseAwarePostprocessor,
    PhaseAwareReorder,
    RepackWarning,
    text_qa_conversation,
)
from llama_index.postprocessor.phaseaware.synthesizer import (
    SENT_KEY,
    PhaseAwareSynthesizer,
    PlanSent,
    phaseaware_query_engine,
)

__all__ = [
    "ASSEMBLY_KEY",
    "PLACEMENT_KEY",
    "PhaseAwareNode",
    "PhaseAwarePostprocessor",
    "PhaseAwareReorder",
    "PhaseAwareSynthesizer",
    "PlanSent",
    "RepackWarning",
    "SENT_KEY",
    "phaseaware_query_engine",
    "text_qa_conversation",
]

_MOVED = ("NodeRegistry", "PhaseAwareAgentLLM", "retriever_tool")


def __getattr__(name: str) -> Any:
    if name in _MOVED:
        raise ImportError(
            f"{name} is in the llama-index-llms-phaseaware package now: pip install -e "
            "integrations/llama-index-llms (in the root of a phaseaware clone), then from "
            f"llama_index.llms.phaseaware import {name}"
        )
    raise AttributeError(f"module 'llama_index.postprocessor.phaseaware' has no attribute {name!r}")
