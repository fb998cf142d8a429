"""The placement report every adapter returns: one shape, from the result's own serializer."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from phaseaware.assembly.report.result import AssemblyResult, Segment
from phaseaware.integrate.records import record_index

__all__ = ["PlacedRecord", "placed_records", "placement_report", "stale_reason"]


def placement_report(result: AssemblyResult, ids: Sequence[object]) -> dict[str, Any]:
    """``result.to_dict()`` plus, per placement, ``document_index`` (the record's input
    index) and ``document_id`` (``ids[index]``, the framework's own id, ``None`` if none).

    Token positions are prompt token indices (BOS = 0); residues are taken at
    index + ``position_offset``. Planned over an offset set (``options.offsets``, or a
    varying endpoint record), no single residue is known: each placement's
    ``residues`` is ``None`` and ``report["robust"]`` holds the per-offset claims.
    ``merged_duplicates``: records under one id merged into one (``kept``, ``merged``:
    record indices; ``document_id``: their shared id); its length counts the merges.
    """
    report = result.to_dict()
    for entry in report["merged_duplicates"]:
        entry["document_id"] = ids[entry["kept"]]
    for placement in report["placements"]:
        index = record_index(placement["chunk_id"])
        placement["document_index"] = index
        placement["document_id"] = ids[index]
        if result.robust is not None:
            placement["residues"] = None  # unknown: the offset is one of a set
    return report


@dataclass(frozen=True)
class PlacedRecord:
    """One admitted record in context order: its input index, rendered segment (pad
    included) and its entry of the placement report."""

    index: int
    segment: Segment
    placement: dict[str, Any]


def placed_records(result: AssemblyResult, report: dict[str, Any]) -> list[PlacedRecord]:
    """The admitted records of ``result`` in context order (``report`` from
    :func:`placement_report` of the same result)."""
    return [
        PlacedRecord(index=p["document_index"], segment=s, placement=p)
        for p, s in zip(report["placements"], result.segments, strict=True)
    ]


def stale_reason(
    report: Mapping[str, Any], *, ids: Sequence[object], texts: Sequence[str | None]
) -> str | None:
    """Why records handed back after a plan (their ``ids`` and current ``texts``, in the
    order given; ``None`` text: the record lost its text) no longer match ``report`` (a
    :func:`placement_report`); ``None`` when they are the plan's, unchanged and in order."""
    placements = list(report.get("placements", ()))
    if list(ids) != [p["document_id"] for p in placements]:
        return "records were reordered, added or removed after planning"
    prompt = str(report["prompt"])
    for p, record_id, text in zip(placements, ids, texts, strict=True):
        if text != prompt[int(p["segment_char_start"]) : int(p["char_end"])]:
            return f"the text of {record_id!r} changed after planning"
    return None
