"""langchain-phaseaware: token-exact, phase-aware context assembly for LangChain.

:class:`PhaseAwarePrompt` (the exact path; ``.with_report()``), :class:`PhaseAwareMiddleware`
(``create_agent``; extra ``agents``), :class:`PhaseAwareCompressor`,
:class:`PhaseAwareUsageCheck` (a callback) and :class:`PhaseAwareReorder`. Names load
lazily: ``import langchain_phaseaware`` loads neither ``langchain`` nor a tokenizer.
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
