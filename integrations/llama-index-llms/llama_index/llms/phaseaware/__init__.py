"""phaseaware for LlamaIndex agents: an LLM wrapper that aligns each new tool result."""

from llama_index.llms.phaseaware.base import (
    AGENT_REPORT_KEY,
    NodeRegistry,
    PhaseAwareAgentLLM,
    retriever_tool,
)

__all__ = ["AGENT_REPORT_KEY", "NodeRegistry", "PhaseAwareAgentLLM", "retriever_tool"]
