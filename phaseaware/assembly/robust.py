"""Offset-robust placement: stay on reliable residues when the server's offset is one of a set.

When the tokens a server puts before the prompt are unknown, or vary between
requests over a declared set ``D`` (``AssemblyOptions.offsets``, e.g. a date
line of 1-3 tokens), no single residue can be promised. Instead the top
evidence (the repeated chunk, else the most relevant keyed chunk) is present
in copies whose prompt residues differ, chosen so that for **every** offset
``d`` in ``D`` at least one copy's model residue ``(t + d) mod S`` is
*reliable*: its profile reliability is within ``tolerance`` of the best
residue's (``reliable_residues``; default tolerance 0.05, i.e. 5 points).

Planning is pure and lives in ``plan.robust`` (``reliable_residues``,
``covering_residues``, ``covered_offsets``: ints only, checked against brute force
by property tests; the naive baseline per offset is planned by ``planner.start_plan``). ``add_copies``
realises a plan on an assembled result: it appends ``SEP + pad + evidence``
blocks after the last chunk (and its repeat), choosing each pad by
re-tokenizing the prompt until the copy's key token sits on the wanted
residue, then re-tokenizes the final prompt and reports only what that
tokenization confirms: per-offset residues of every copy, the offsets
covered, the expected accuracy under each offset (a chunk scored by its best
copy), its worst case beside the single-offset figure, and the extra tokens.
Residues of placements are left empty: no single residue is known.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence

from phaseaware.assembly.inputs.untrusted import confirm
from phaseaware.assembly.plan.planner import PlanStart
from phaseaware.assembly.plan.reliability import position_reliability, weighted_accuracy
from phaseaware.assembly.plan.robust import (
    covered_offsets,
    covering_residues,
    primary_offset,
    reliable_residues,
)
from phaseaware.assembly.prepare.measured_request import Setup
from phaseaware.assembly.prepare.render import (
    CHUNK_SEPARATOR,
    pad_block,
    render_prompt,
    repeat_block,
)
from phaseaware.assembly.report.result import AssemblyResult, Placement, RobustCopy, RobustReport
from phaseaware.errors import InputError
from phaseaware.tokenizers.base import TokenizedText

__all__ = [
    "add_copies",
    "covered_offsets",
    "covering_residues",
    "primary_offset",
    "reliable_residues",
]


def _top_chunk(planned: PlanStart, result: AssemblyResult) -> tuple[int, Placement] | None:
    """(input index, placement) of the evidence to copy: the repeat's chunk, else the
    most relevant placement with keys."""
    ranked = planned.ranked
    keyed = [p for p in result.placements if p.key_token_positions]
    if not keyed:
        return None
    if result.repeat is not None:
        keyed = [p for p in keyed if p.chunk_id == result.repeat.chunk_id] or keyed
    top = min(keyed, key=lambda p: p.rank)
    return ranked[top.rank], top


def add_copies(setup: Setup, result: AssemblyResult, planned: PlanStart) -> AssemblyResult:
    """``result`` with copies of its top evidence so every offset in
    ``setup.options.offsets`` has a copy on a reliable residue (within the budget);
    ``planned``: the request's planned weights and naive baseline per offset."""
    options, profile = setup.options, setup.profile
    offsets = options.offsets or ()
    if profile is None or setup.filler is None:
        raise InputError(
            "options.offsets needs a profile and padding (pad=true): robust placement "
            "aims copies at the profile's reliable residues"
        )
    period = profile.period
    reliable = reliable_residues(
        [profile.residue_reliability(r) for r in range(period)], tolerance=options.robust_tolerance
    )
    top = _top_chunk(planned, result)
    prefix, suffix = setup.frame.prefix, setup.frame.suffix
    context, added, measured = result.context, "", setup.tokenizer.tokenize(result.prompt)
    insert_at = len(context)
    copy_chars: list[tuple[int, bool]] = []
    if top is not None:
        i, placement = top
        copy_chars.append((placement.key_char_offsets[0], False))
        if result.repeat is not None and result.repeat.chunk_id == placement.chunk_id:
            copy_chars.append((result.repeat.key_char_offsets[0], False))
            start = context.rfind(result.repeat.text)
            insert_at = start + len(result.repeat.text)
        else:
            insert_at = placement.char_end - len(prefix)
        prep = setup.chunks[i]
        block = repeat_block(
            prep.chunk.text, prep.key_chars, label=options.repeat_label,
            max_chars=options.repeat_max_chars,
        )  # fmt: skip
        existing = [measured.token_at_char(c) % period for c, _ in copy_chars]
        wanted = covering_residues(
            existing=existing, offsets=offsets, period=period, reliable=reliable
        )
        for residue in wanted:
            for k in range(2 * period):
                piece = CHUNK_SEPARATOR + pad_block(setup.filler.unit, k) + block.text
                text = prefix + context[:insert_at] + added + piece + context[insert_at:] + suffix
                key_char = (len(prefix) + insert_at + len(added) + len(piece) - len(block.text)
                            + block.key_chars[0])  # fmt: skip
                trial = setup.tokenizer.tokenize(text)
                if len(trial) > setup.budget:
                    break
                if trial.token_at_char(key_char) % period == residue:
                    added += piece
                    copy_chars.append((key_char, True))
                    break
    new_context = context[:insert_at] + added + context[insert_at:]
    # rendered and checked as every other prompt is: prefix + context + suffix, and no
    # control string beyond the template's (copies are chunk text, so untrusted too)
    rendered = render_prompt(
        setup.layout, system=setup.system, question=setup.question, context=new_context,
        prefix=prefix, suffix=suffix,
    )  # fmt: skip
    if setup.scanner is not None:
        confirm(setup.scanner, frame=prefix + suffix, prompt=rendered.text)
    final = setup.tokenizer.tokenize(rendered.text)
    report, per_chunk = _report(setup, planned, result, final, top, copy_chars, offsets, reliable)
    placements = tuple(
        dataclasses.replace(
            p,
            token_start=final.token_span(p.char_start, p.char_end)[0],
            token_end=final.token_span(p.char_start, p.char_end)[1],
            key_token_positions=tuple(final.token_at_char(c) for c in p.key_char_offsets),
            residues=(),
            expected_accuracy=per_chunk.get(p.chunk_id, p.expected_accuracy),
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
        result, prompt=rendered.text, messages=rendered.messages, context=new_context,
        token_count=len(final), placements=placements, repeat=repeat, length_residue=None,
        expected_accuracy=report.worst_case_accuracy, robust=report,
        naive_expected_accuracy=report.naive_worst_case_accuracy,
        position_offset=primary_offset(offsets),
    )  # fmt: skip


def _report(
    setup: Setup,
    planned: PlanStart,
    result: AssemblyResult,
    final: TokenizedText,
    top: tuple[int, Placement] | None,
    copy_chars: Sequence[tuple[int, bool]],
    offsets: Sequence[int],
    reliable: frozenset[int],
) -> tuple[RobustReport, dict[str, float | None]]:
    """The per-offset claims, measured on ``final``; and each chunk's worst-case accuracy."""
    assert setup.profile is not None
    period = setup.profile.period
    positions = [final.token_at_char(c) for c, _ in copy_chars]
    copies = tuple(
        RobustCopy(
            key_token_position=t,
            key_char_offset=c,
            residues=tuple((d, (t + d) % period) for d in offsets),
            added=added,
        )
        for t, (c, added) in zip(positions, copy_chars, strict=True)
    )
    ranked = planned.ranked
    keyed = [not p.empty and bool(p.key_chars) for p in setup.chunks]
    by_offset: list[tuple[int, float | None]] = []
    worst: dict[str, float | None] = {}
    for d in offsets:
        rel = position_reliability(setup.profile, length=len(final), offset=d)
        accuracy: dict[int, float | None] = {}
        for p in result.placements:
            keys = [rel(final.token_at_char(c)) for c in p.key_char_offsets]
            value = sum(keys) / len(keys) if keys else None
            if top is not None and p.chunk_id == top[1].chunk_id and positions:
                value = max([value or 0.0, *(rel(t) for t in positions)])
            accuracy[ranked[p.rank]] = value
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
        reliable_residues=tuple(sorted(reliable)),
        top_chunk_id=top[1].chunk_id if top is not None else None,
        copies=copies,
        covered=covered_offsets(
            copy_residues=[t % period for t in positions],
            offsets=offsets,
            period=period,
            reliable=reliable,
        ),  # fmt: skip
        accuracy_by_offset=tuple(by_offset),
        worst_case_accuracy=min(values) if values else None,
        single_offset_accuracy=result.expected_accuracy,
        naive_worst_case_accuracy=min(naive_values) if naive_values else None,
        extra_tokens=len(final) - result.token_count,
    )
    return report, worst
