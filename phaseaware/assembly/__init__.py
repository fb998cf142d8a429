"""Token-exact, phase-aware context assembly (``assemble``) and its parts.

One module per job: ``chunks`` (the input type), ``evidence`` (key tokens),
``measure`` (chunks in context), ``filler`` (exact padding text), ``setup``
(a checked, measured request), ``planner`` and ``padding`` (all planning, pure),
``render`` (context and prompt text), ``verify`` (re-tokenization to a fixed
point), ``stitch`` (the bounded chunk-token cache and windowed verification),
``result`` (measured placements), ``pipeline`` (``assemble``),
``options`` and ``request`` (the request document of ``phaseaware assemble``).
"""

from __future__ import annotations

from phaseaware.assembly.chunks import Chunk
from phaseaware.assembly.options import AssemblyOptions, check_position_offset
from phaseaware.assembly.pipeline import assemble, assemble_from_specs
from phaseaware.assembly.result import (
    AssemblyResult,
    Dropped,
    Placement,
    RepeatPlacement,
    Segment,
)
from phaseaware.assembly.stitch import ChunkTokenCache, default_cache

__all__ = [
    "AssemblyOptions",
    "AssemblyResult",
    "Chunk",
    "ChunkTokenCache",
    "Dropped",
    "Placement",
    "RepeatPlacement",
    "Segment",
    "assemble",
    "assemble_from_specs",
    "check_position_offset",
    "default_cache",
]
