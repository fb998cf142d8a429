"""The report of an offset-robust assembly: claims per offset, none single.

``robust_result`` turns the single-offset result (measured before the copies) and the
confirmed copies into the final result: every position re-read on the final prompt's
tokenization, residues left empty (no single residue is known), and a ``RobustReport``
of what that tokenization confirms: each copy's residue under every offset, the offsets
covered, the expected accuracy under each offset (a chunk scored by its best copy), its
worst case beside the single-offset figure and the naive baseline's (planned once by
``planner.start_plan``), and the extra tokens.
"""

from __future__ import annotations

import dataclasses

from phaseaware.assembly.plan.planner import PlanStart
from phaseaware.assembly.plan.reliability import position_reliability, weighted_accuracy
from phaseaware.assembly.plan.robust import covered_offsets, primary_offset
from phaseaware.assembly.prepare.measured_request import Setup
from phaseaware.assembly.report.result import AssemblyResult, RobustCopy, RobustReport
from phaseaware.assembly.verify.final import Copies

__all__ = ["robust_result"]


def robust_result(
    setup: Setup, planned: PlanStart, result: AssemblyResult, copies: Copies
) -> AssemblyResult:
    """``result`` (single offset, before the copies) as the prompt with ``copies`` reads
    (the final prompt, ``Confirmed.prompt``, is already ``result``'s)."""
    assert setup.profile is not None  # verify.final refused the request without one
    offsets = setup.options.offsets or ()
    period, final = setup.profile.period, copies.measured
    top_id = setup.chunks[copies.top].chunk.id or "" if copies.top is not None else None
    positions = [final.token_at_char(c) for c, _ in copies.chars]
    keyed = [not p.empty and bool(p.key_chars) for p in setup.chunks]
    by_offset: list[tuple[int, float | None]] = []
    worst: dict[str, float | None] = {}
    for d in offsets:
        rel = position_reliability(setup.profile, length=len(final), offset=d)
        accuracy: dict[int, float | None] = {}
        for p in result.placements:
            keys = [rel(final.token_at_char(c)) for c in p.key_char_offsets]
            value = sum(keys) / len(keys) if keys else None
            if top_id is not None and p.chunk_id == top_id and positions:
                value = max([value or 0.0, *(rel(t) for t in positions)])
            accuracy[planned.ranked[p.rank]] = value
            if value is not None:
                previous = worst.get(p.chunk_id)
                worst[p.chunk_id] = value if previous is None else min(previous, value)
        by_offset.append(
            (d, weighted_accuracy(weights=planned.weights, keyed=keyed, accuracy=accuracy))
        )
    values = [a for _, a in by_offset if a is not None]
    naive_values = [a for a in planned.naive_by_offset if a is not None]
    report = RobustReport(
        offsets=tuple(offsets),
        tolerance=setup.options.robust_tolerance,
        reliable_residues=tuple(sorted(copies.reliable)),
        top_chunk_id=top_id,
        copies=tuple(
            RobustCopy(
                key_token_position=t,
                key_char_offset=c,
                residues=tuple((d, (t + d) % period) for d in offsets),
                added=added,
            )
            for t, (c, added) in zip(positions, copies.chars, strict=True)
        ),
        covered=covered_offsets(
            copy_residues=[t % period for t in positions],
            offsets=offsets,
            period=period,
            reliable=copies.reliable,
        ),
        accuracy_by_offset=tuple(by_offset),
        worst_case_accuracy=min(values) if values else None,
        single_offset_accuracy=result.expected_accuracy,
        naive_worst_case_accuracy=min(naive_values) if naive_values else None,
        extra_tokens=len(final) - result.token_count,
    )
    placements = tuple(
        dataclasses.replace(
            p,
            token_start=final.token_span(p.char_start, p.char_end)[0],
            token_end=final.token_span(p.char_start, p.char_end)[1],
            key_token_positions=tuple(final.token_at_char(c) for c in p.key_char_offsets),
            residues=(),
            expected_accuracy=worst.get(p.chunk_id, p.expected_accuracy),
        )
        for p in result.placements
    )
    repeat = result.repeat
    if repeat is not None:
        repeat = dataclasses.replace(
            repeat,
            key_token_positions=tuple(final.token_at_char(c) for c in repeat.key_char_offsets),
            residues=(),
        )
    return dataclasses.replace(
        result, context=copies.context, token_count=len(final), placements=placements, repeat=repeat,
        length_residue=None, expected_accuracy=report.worst_case_accuracy, robust=report,
        naive_expected_accuracy=report.naive_worst_case_accuracy,
        position_offset=primary_offset(offsets),
    )  # fmt: skip
