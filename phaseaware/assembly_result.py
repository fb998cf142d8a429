"""Moved: ``phaseaware.assembly.result`` (results) and ``phaseaware.assembly.options``."""

from phaseaware.assembly.options import AssemblyOptions
from phaseaware.assembly.result import (
    AssemblyResult,
    Dropped,
    Placement,
    RepeatPlacement,
    build_result,
)

__all__ = [
    "AssemblyOptions",
    "AssemblyResult",
    "Dropped",
    "Placement",
    "RepeatPlacement",
    "build_result",
]
