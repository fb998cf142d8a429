"""Token-exact, phase-aware context assembly (``assemble``) and its parts, by stage.

Lowest first (a subpackage imports its own or lower ones only; the layer test checks it):

- ``plan/``: ALL planning, pure functions over integers (admit, order, pads, repeat,
  offset-robust copies), entered through ``plan.planner`` (start_plan, initial, replan);
- ``retokenize/``: the chunk-token cache and windowed, proven-equal re-tokenization;
- ``inputs/``: the request's chunks and options, and neutralising untrusted text;
- ``evidence/``: which characters of a chunk are its key evidence;
- ``prepare/``: render text, measure chunks in context, filler, the measured request;
- ``verify/`` and ``report/``: the fixed point, the final prompt (copies for offset
  sets included), and the result;
- ``pipeline`` (``assemble``), ``incremental`` and ``conversation`` (any chat and
  agent-loop appends): orchestration only; they call, they never score.
- ``entry``: the two public doors, ``assemble`` and ``assemble_append``, over one
  ``AssemblyRequest`` (``inputs/request``).
"""

from __future__ import annotations

from phaseaware.assembly.entry import assemble, assemble_append
from phaseaware.assembly.inputs.chunks import Chunk
from phaseaware.assembly.inputs.options import AssemblyOptions, check_position_offset
from phaseaware.assembly.inputs.request import AssemblyRequest
from phaseaware.assembly.report.result import (
    AssemblyResult,
    Dropped,
    Placement,
    RepeatPlacement,
    Segment,
)
from phaseaware.assembly.retokenize.windowed import ChunkTokenCache, default_cache

__all__ = [
    "AssemblyOptions",
    "AssemblyRequest",
    "AssemblyResult",
    "Chunk",
    "ChunkTokenCache",
    "Dropped",
    "Placement",
    "RepeatPlacement",
    "Segment",
    "assemble",
    "assemble_append",
    "check_position_offset",
    "default_cache",
]
