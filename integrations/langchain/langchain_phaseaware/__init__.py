"""langchain-phaseaware: token-exact, phase-aware context assembly for LangChain.

Names load on first use: ``import langchain_phaseaware`` loads neither ``langchain`` nor a
tokenizer. What each component does: the package README.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

__version__ = "0.1.0"

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

_MODULES = {  # submodule -> the public names it defines
    "convert": ("document_chunks",),
    "documents": ("PhaseAwareCompressor", "PhaseAwareReorder"),
    "middleware": ("PhaseAwareMiddleware",),
    "prompt": ("PhaseAwarePrompt", "PhaseAwarePromptWithReport", "placement_report"),
    "usage": ("PhaseAwareUsageCheck",),
}

if TYPE_CHECKING:  # pragma: no cover
    from langchain_phaseaware.convert import document_chunks
    from langchain_phaseaware.documents import PhaseAwareCompressor, PhaseAwareReorder
    from langchain_phaseaware.middleware import PhaseAwareMiddleware
    from langchain_phaseaware.prompt import (
        PhaseAwarePrompt,
        PhaseAwarePromptWithReport,
        placement_report,
    )
    from langchain_phaseaware.usage import PhaseAwareUsageCheck


def __getattr__(name: str) -> Any:
    module = next((m for m, names in _MODULES.items() if name in names), None)
    if module is None:
        raise AttributeError(f"module 'langchain_phaseaware' has no attribute {name!r}")
    return getattr(importlib.import_module(f"{__name__}.{module}"), name)


def __dir__() -> list[str]:
    return sorted(__all__)
