"""Moved: ``phaseaware.assembly.chunks`` (measurement: ``phaseaware.assembly.measure``)."""

from phaseaware.assembly.chunks import Chunk, chunks_from_request, normalize_chunks
from phaseaware.assembly.filler import chunk_pad_tables
from phaseaware.assembly.measure import MeasuredChunk, measure_chunks
from phaseaware.assembly.planner import NO_PAD

__all__ = [
    "Chunk",
    "MeasuredChunk",
    "NO_PAD",
    "chunk_pad_tables",
    "chunks_from_request",
    "measure_chunks",
    "normalize_chunks",
]
