"""Verification: render, re-tokenize, re-plan from measured positions to a fixed point.

The rendered prompt is tokenized once per round and every key token's
position is read off that tokenization (char offset → token). The pads are
re-planned from those *measured* base positions; an unchanged plan is
confirmed. After ``max_repair_rounds`` rounds, the chunks whose padding still
moves are frozen unpadded (and the end pad dropped if it moves): a new
``PadTables`` value, the ``Setup`` itself never changes. No fixed point then:
``VerificationError``.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence
from dataclasses import dataclass

from phaseaware.assembly.plan import planner
from phaseaware.assembly.plan.planner import NO_PAD, PadTables, Plan
from phaseaware.assembly.prepare.measured_request import Setup, end_reserve, plan_pads
from phaseaware.assembly.prepare.render import RenderedContext, RepeatBlock, render_context
from phaseaware.assembly.retokenize.windowed import stitched_starts
from phaseaware.errors import VerificationError
from phaseaware.tokenizers.offsets import TokenStarts

__all__ = ["Verified", "verify", "freeze_moving", "measured_keys"]


@dataclass(frozen=True)
class Verified:
    """A plan confirmed by re-tokenization, with the prompt tokenization that confirmed it."""

    plan: Plan
    tables: PadTables  # the pad tables it was confirmed with (moving pads frozen)
    rendered: RenderedContext
    measured: TokenStarts  # of prefix + rendered.text + suffix (stitched or one encode)


def verify(setup: Setup, tables: PadTables, plan: Plan, repeat: RepeatBlock | None) -> Verified:
    """The fixed point reached from ``plan`` (``repeat``: the block of ``plan.repeat``)."""
    rounds = setup.options.max_repair_rounds
    texts = [p.chunk.text for p in setup.chunks]
    unit = setup.filler.unit if setup.filler is not None else ""
    for round_ in range(rounds + 3):
        rendered = render_context(texts=texts, plan=plan, unit=unit, repeat=repeat)
        measured = _measure(setup, plan, rendered)
        base_keys = measured_keys(setup, tables, plan, rendered, measured)
        length = len(measured) - planner.pad_tokens(tables=tables, plan=plan)
        slack = setup.budget - length - end_reserve(setup, tables)
        pads, end_k = plan_pads(setup, tables, plan.order, base_keys, length=length, slack=slack)
        if pads == plan.pads and end_k == plan.end_pad:
            return Verified(plan=plan, tables=tables, rendered=rendered, measured=measured)
        if round_ >= rounds:
            tables = freeze_moving(tables, plan, pads=pads, end_pad=end_k)
            # base_keys stay the measured ones
            pads, end_k = plan_pads(
                setup, tables, plan.order, base_keys, length=length, slack=slack
            )
        plan = dataclasses.replace(plan, pads=pads, end_pad=end_k)
    ids = [setup.chunks[i].chunk.id for i in plan.order]
    raise VerificationError(
        f"re-tokenization did not confirm the padding of chunks {ids} after "
        f"{rounds} repair rounds (tokens merge across chunk boundaries); assemble with "
        "AssemblyOptions(pad=False) or start the chunks with a letter or digit"
    )


def _measure(setup: Setup, plan: Plan, rendered: RenderedContext) -> TokenStarts:
    """Token starts of prefix + context + suffix; chunk texts from the cache where sound."""
    frame = setup.frame
    offset = len(frame.prefix)
    spans = [
        (offset + start, offset + start + len(setup.chunks[i].chunk.text))
        for i, start in zip(plan.order, rendered.chunk_starts, strict=True)
    ]
    text = frame.prefix + rendered.text + frame.suffix
    return stitched_starts(setup.tokenizer, text, spans, cache=setup.cache)


def freeze_moving(tables: PadTables, plan: Plan, *, pads: Sequence[int], end_pad: int) -> PadTables:
    """``tables`` with no padding for the chunks (and end pad) whose pads moved from ``plan``."""
    chunks = list(tables.chunks)
    for i, old, new in zip(plan.order, plan.pads, pads, strict=True):
        if old != new:
            chunks[i] = NO_PAD
    end = tables.end if end_pad == plan.end_pad else None
    return PadTables(chunks=tuple(chunks), end=end)


def measured_keys(
    setup: Setup,
    tables: PadTables,
    plan: Plan,
    rendered: RenderedContext,
    measured: TokenStarts,
) -> list[tuple[int, ...]]:
    """Measured key positions minus the planned shift of the pads before each key."""
    offset = len(setup.frame.prefix)
    chars = [
        offset + start + c
        for i, start in zip(plan.order, rendered.chunk_starts, strict=True)
        for c in setup.chunks[i].key_chars
    ]
    tokens = iter(measured.tokens_at_chars(chars))
    out: list[tuple[int, ...]] = []
    shift = 0
    for i, k in zip(plan.order, plan.pads, strict=True):
        shift += tables.chunks[i].shifts[k]
        out.append(tuple(next(tokens) - shift for _ in setup.chunks[i].key_chars))
    return out
