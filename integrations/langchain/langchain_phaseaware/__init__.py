"""langchain-phaseaware: token-exact, phase-aware context assembly for LangChain.

- :class:`PhaseAwarePrompt`: the exact path (a Runnable: documents + question ->
  ``ChatPromptValue``); ``.with_report()`` adds the placement report per call.
- :class:`PhaseAwareMiddleware`: ``create_agent`` middleware that aligns the newest
  tool result by append alignment (needs the ``agents`` extra: ``langchain``).
- :class:`PhaseAwareCompressor`: a ``BaseDocumentCompressor`` for
  ``ContextualCompressionRetriever`` pipelines (exact only under stated conditions).
- :class:`PhaseAwareUsageCheck`: a callback comparing ``usage.prompt_tokens`` with
  the rendered prompt.
- :class:`PhaseAwareReorder`: a drop-in for ``LongContextReorder`` (a document transformer).

Names are imported lazily, so ``import langchain_phaseaware`` loads neither
``langchain`` (agents) nor any tokenizer.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

__version__ = "0.1.0"

_EXPORTS: dict[str, str] = {
    "PhaseAwarePrompt": "langchain_phaseaware.prompt",
    "PhaseAwarePromptWithReport": "langchain_phaseaware.prompt",
    "placement_report": "langchain_phaseaware.prompt",
    "PhaseAwareMiddleware": "langchain_phaseaware.middleware",
    "PhaseAwareCompressor": "langchain_phaseaware.compressor",
    "PhaseAwareReorder": "langchain_phaseaware.reorder",
    "PhaseAwareUsageCheck": "langchain_phaseaware.usage",
    "document_chunks": "langchain_phaseaware.convert",
}

__all__ = [
    "PhaseAwareCompressor",
    "PhaseAwareMiddleware",
    "PhaseAwarePrompt",
    "PhaseAwarePromptWithReport",
    "PhaseAwareReorder",
    "PhaseAwareUsageCheck",
    "__version__",
    "document_chunks",
    "placement_report",
]

if TYPE_CHECKING:  # pragma: no cover
    from langchain_phaseaware.compressor import PhaseAwareCompressor
    from langchain_phaseaware.convert import document_chunks
    from langchain_phaseaware.middleware import PhaseAwareMiddleware
    from langchain_phaseaware.prompt import (
        PhaseAwarePrompt,
        PhaseAwarePromptWithReport,
        placement_report,
    )
    from langchain_phaseaware.reorder import PhaseAwareReorder
    from langchain_phaseaware.usage import PhaseAwareUsageCheck


def __getattr__(name: str) -> Any:
    module = _EXPORTS.get(name)
    if module is None:
        raise AttributeError(f"module 'langchain_phaseaware' has no attribute {name!r}")
    return getattr(importlib.import_module(module), name)


def __dir__() -> list[str]:
    return sorted(__all__)
