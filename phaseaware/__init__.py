"""phaseaware: phase-aware, token-exact context assembly for chunk-compressed LLMs.

The public surface, re-exported lazily so that ``import phaseaware`` stays
cheap (no tokenizer files are read and nothing heavy is imported until used).
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

__version__ = "0.1.0"

_EXPORTS: dict[str, str] = {
    "Chunk": "phaseaware.chunks",
    "assemble": "phaseaware.assembly",
    "assemble_from_specs": "phaseaware.assembly",
    "AssemblyOptions": "phaseaware.assembly_result",
    "AssemblyResult": "phaseaware.assembly_result",
    "Placement": "phaseaware.assembly_result",
    "audit_prompt": "phaseaware.audit",
    "Profile": "phaseaware.profiles.model",
    "get_profile": "phaseaware.profiles.registry",
    "list_profiles": "phaseaware.profiles.registry",
    "load_profile": "phaseaware.profiles.io",
    "save_profile": "phaseaware.profiles.io",
    "load_tokenizer": "phaseaware.tokenizers.registry",
    "get_layout": "phaseaware.templates",
}

__all__ = [
    "AssemblyOptions",
    "AssemblyResult",
    "Chunk",
    "Placement",
    "Profile",
    "__version__",
    "assemble",
    "assemble_from_specs",
    "audit_prompt",
    "get_layout",
    "get_profile",
    "list_profiles",
    "load_profile",
    "load_tokenizer",
    "save_profile",
]

if TYPE_CHECKING:  # pragma: no cover
    from phaseaware.assembly import assemble, assemble_from_specs
    from phaseaware.assembly_result import AssemblyOptions, AssemblyResult, Placement
    from phaseaware.audit import audit_prompt
    from phaseaware.chunks import Chunk
    from phaseaware.profiles.io import load_profile, save_profile
    from phaseaware.profiles.model import Profile
    from phaseaware.profiles.registry import get_profile, list_profiles
    from phaseaware.templates import get_layout
    from phaseaware.tokenizers.registry import load_tokenizer


def __getattr__(name: str) -> Any:
    module = _EXPORTS.get(name)
    if module is None:
        raise AttributeError(f"module 'phaseaware' has no attribute {name!r}")
    return getattr(importlib.import_module(module), name)


def __dir__() -> list[str]:
    return sorted(__all__)
