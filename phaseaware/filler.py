"""Moved: ``phaseaware.assembly.filler`` (the separator and pad text: ``phaseaware.assembly.render``)."""

from phaseaware.assembly.filler import *  # noqa: F403
from phaseaware.assembly.filler import __all__ as _filler_all
from phaseaware.assembly.planner import PadTable
from phaseaware.assembly.render import CHUNK_SEPARATOR, PAD_TERMINATOR, end_pad, pad_block

__all__ = [*_filler_all, "PadTable", "CHUNK_SEPARATOR", "PAD_TERMINATOR", "end_pad", "pad_block"]
