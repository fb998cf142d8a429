"""langchain-phaseaware: token-exact, phase-aware context assembly for LangChain (README).

Names load on first use: ``import langchain_phaseaware`` loads no ``langchain``, no tokenizer.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

__version__ = "0.1.0"

_MODULES = {  # submodule -> the public names it defines, imported on first use
    "convert": ("document_chunks",),
    "documents": ("PhaseAwareCompressor", "PhaseAwareReorder"),
    "middleware": ("PhaseAwareMiddleware",),
    "prompt": ("PhaseAwarePrompt", "PhaseAwarePromptWithReport", "placement_report"),
    "served": ("prompt_ids_clients",),
    "usage": ("PhaseAwareUsageCheck",),
}
__all__ = sorted(["__version__", *(name for names in _MODULES.values() for name in names)])

if TYPE_CHECKING:  # pragma: no cover (the same names, for type checkers)
    from langchain_phaseaware.convert import document_chunks as document_chunks
    from langchain_phaseaware.documents import PhaseAwareCompressor as PhaseAwareCompressor
    from langchain_phaseaware.documents import PhaseAwareReorder as PhaseAwareReorder
    from langchain_phaseaware.middleware import PhaseAwareMiddleware as PhaseAwareMiddleware
    from langchain_phaseaware.prompt import PhaseAwarePrompt as PhaseAwarePrompt
    from langchain_phaseaware.prompt import PhaseAwarePromptWithReport as PhaseAwarePromptWithReport
    from langchain_phaseaware.prompt import placement_report as placement_report
    from langchain_phaseaware.served import prompt_ids_clients as prompt_ids_clients
    from langchain_phaseaware.usage import PhaseAwareUsageCheck as PhaseAwareUsageCheck


#: submodule -> (the packages only it needs beyond langchain-core, the extra that installs them)
_EXTRAS = {"middleware": (("langchain", "langgraph"), "agents")}


def __getattr__(name: str) -> Any:
    module = next((m for m, names in _MODULES.items() if name in names), None)
    if module is None:
        raise AttributeError(f"module 'langchain_phaseaware' has no attribute {name!r}")
    try:
        loaded = importlib.import_module(f"{__name__}.{module}")
    except ModuleNotFoundError as exc:
        needs, extra = _EXTRAS.get(module, ((), ""))
        missing = (exc.name or "").split(".")[0]
        if missing not in needs:
            raise
        raise ImportError(
            f"{name} needs the {missing} package ({module}: create_agent), which is not "
            f"installed: pip install 'langchain-phaseaware[{extra}]'",
            name=missing,
        ) from None
    return getattr(loaded, name)


def __dir__() -> list[str]:
    return sorted(__all__)
