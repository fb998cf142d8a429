"""phaseaware: phase-aware, token-exact context assembly for chunk-compressed LLMs.

The public surface, re-exported lazily so that ``import phaseaware`` stays
cheap (no tokenizer files are read and nothing heavy is imported until used).
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

from phaseaware.version import __version__

_EXPORTS: dict[str, str] = {
    "Chunk": "phaseaware.assembly.inputs.chunks",
    "make_chunk": "phaseaware.assembly.inputs.chunks",
    "assemble": "phaseaware.assembly.entry",
    "assemble_append": "phaseaware.assembly.entry",
    "AssemblyRequest": "phaseaware.assembly.inputs.request",
    "audit_messages": "phaseaware.audit",
    "AssemblyOptions": "phaseaware.assembly.inputs.options",
    "AssemblyResult": "phaseaware.assembly.report.result",
    "Placement": "phaseaware.assembly.report.result",
    "audit_prompt": "phaseaware.audit",
    "Profile": "phaseaware.profiles.model",
    "get_profile": "phaseaware.profiles.registry",
    "list_profiles": "phaseaware.profiles.registry",
    "load_profile": "phaseaware.profiles.io",
    "save_profile": "phaseaware.profiles.io",
    "load_tokenizer": "phaseaware.tokenizers.registry",
    "list_caches": "phaseaware.caches",
    "clear_caches": "phaseaware.caches",
    "ChatSettings": "phaseaware.chat.settings",
}

__all__ = [
    "AssemblyOptions",
    "AssemblyRequest",
    "AssemblyResult",
    "ChatSettings",
    "Chunk",
    "make_chunk",
    "Placement",
    "Profile",
    "__version__",
    "assemble",
    "assemble_append",
    "audit_messages",
    "audit_prompt",
    "clear_caches",
    "get_profile",
    "list_caches",
    "list_profiles",
    "load_profile",
    "load_tokenizer",
    "save_profile",
]

if TYPE_CHECKING:  # pragma: no cover
    from phaseaware.assembly.entry import assemble, assemble_append
    from phaseaware.assembly.inputs.chunks import Chunk, make_chunk
    from phaseaware.assembly.inputs.options import AssemblyOptions
    from phaseaware.assembly.inputs.request import AssemblyRequest
    from phaseaware.assembly.report.result import AssemblyResult, Placement
    from phaseaware.audit import audit_messages, audit_prompt
    from phaseaware.caches import clear_caches, list_caches
    from phaseaware.chat.settings import ChatSettings
    from phaseaware.profiles.io import load_profile, save_profile
    from phaseaware.profiles.model import Profile
    from phaseaware.profiles.registry import get_profile, list_profiles
    from phaseaware.tokenizers.registry import load_tokenizer


def __getattr__(name: str) -> Any:
    module = _EXPORTS.get(name)
    if module is None:
        raise AttributeError(f"module 'phaseaware' has no attribute {name!r}")
    return getattr(importlib.import_module(module), name)


def __dir__() -> list[str]:
    return sorted(__all__)
