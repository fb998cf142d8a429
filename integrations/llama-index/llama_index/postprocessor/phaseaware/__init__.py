"""phaseaware for LlamaIndex: phase-aware node arrangement and a synthesis path that keeps it."""

from llama_index.postprocessor.phaseaware.agent import (
    NodeRegistry,
    PhaseAwareAgentLLM,
    retriever_tool,
)
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
    "NodeRegistry",
    "PhaseAwareAgentLLM",
    "retriever_tool",
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
