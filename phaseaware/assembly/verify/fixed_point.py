"""Verification: render, re-tokenize, re-plan from measured positions to a fixed point.

The rendered prompt is tokenized once per round and every key token's
position is read off that tokenization (char offset → token). The planner
re-pads from those *measured* base positions (``planner.replan``); an
unchanged plan is confirmed. After ``max_repair_rounds`` rounds, the chunks
whose padding still moves are frozen unpadded (and the end pad dropped if it
moves): a new ``PadTables`` value, the ``Setup`` itself never changes. No fixed
point then: ``VerificationError``. A confirmed prompt over the budget (tokens
merged across boundaries) drops the least relevant admitted chunk and plans
again. ``verify.final`` then renders the confirmed context into the final prompt.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from phaseaware.assembly.plan import planner
from phaseaware.assembly.plan.initial import RepeatOffer
from phaseaware.assembly.plan.planner import PadTables, Plan, PlanStart
from phaseaware.assembly.prepare.measured_request import Setup
from phaseaware.assembly.prepare.render import (
    RenderedContext,
    RepeatBlock,
    render_context,
)
from phaseaware.assembly.retokenize.windowed import stitched_starts
from phaseaware.errors import VerificationError
from phaseaware.tokenizers.offsets import TokenStarts

__all__ = ["Fixed", "Verified", "verify"]


@dataclass(frozen=True)
class Verified:
    """A plan confirmed by re-tokenization, with the prompt tokenization that confirmed it."""

    plan: Plan
    tables: PadTables  # the pad tables it was confirmed with (moving pads frozen)
    rendered: RenderedContext
    measured: TokenStarts  # of prefix + rendered.text + suffix (stitched or one encode)


@dataclass(frozen=True)
class Fixed:
    """What the fixed point confirmed: the ``verified`` plan (None: no chunk admitted), the
    dropped chunks (input index -> reason) and those of them dropped ``after_merge`` (the
    measured prompt was over the budget with them)."""

    verified: Verified | None
    dropped: Mapping[int, str]
    after_merge: frozenset[int]


def verify(
    setup: Setup, planned: PlanStart, offer: RepeatOffer | None, block: RepeatBlock | None
) -> Fixed:
    """Plan (``planner.initial``), render and confirm the ``planned`` admitted chunks;
    ``offer``: the repeat's measured offer and ``block`` its text (``repeat_offer``)."""
    dropped = {**dict(planned.dropped), **setup.oversize}  # oversize: emptied, unread
    merged: set[int] = set()
    admitted, tables = list(planned.admitted), setup.request.tables
    verified = None
    while admitted:
        found = _fixed_point(setup, planned, tables, admitted, offer, block)
        if len(found.measured) <= setup.budget:
            verified = found
            break
        tables = found.tables  # pads frozen by verification stay frozen
        # Boundary merges made the prompt longer than estimated: drop the least relevant.
        merged.add(admitted[-1])
        dropped[admitted.pop()] = (
            f"over budget: the prompt measured {len(found.measured)} tokens with it, "
            f"budget is {setup.budget}"
        )
    return Fixed(verified=verified, dropped=dropped, after_merge=frozenset(merged))


def _fixed_point(
    setup: Setup,
    planned: PlanStart,
    tables: PadTables,
    admitted: Sequence[int],
    offer: RepeatOffer | None,
    block: RepeatBlock | None,
) -> Verified:
    """The fixed point reached from the initial plan of ``admitted`` (``offer``: the
    repeat's; ``block``: its text, rendered if the plan repeats it)."""
    plan = planner.initial(
        request=setup.request, weights=planned.weights, admitted=admitted, tables=tables,
        repeat=offer,
    )  # fmt: skip
    rounds = setup.options.max_repair_rounds
    texts = [p.chunk.text for p in setup.chunks]
    unit = setup.filler.unit if setup.filler is not None else ""
    frame, offset = setup.frame, len(setup.frame.prefix)
    for round_ in range(rounds + 3):
        rendered = render_context(
            texts=texts, plan=plan, unit=unit, repeat=block if plan.repeat is not None else None
        )
        starts = list(zip(plan.order, rendered.chunk_starts, strict=True))
        measured = stitched_starts(
            setup.tokenizer,
            frame.prefix + rendered.text + frame.suffix,
            [(offset + s, offset + s + len(texts[i])) for i, s in starts],
            cache=setup.cache,
        )
        # measured key positions minus the planned shift of the pads before each key
        chars = [offset + s + c for i, s in starts for c in setup.chunks[i].key_chars]
        tokens = iter(measured.tokens_at_chars(chars))
        base_keys: list[tuple[int, ...]] = []
        shift = 0
        for i, k in zip(plan.order, plan.pads, strict=True):
            shift += tables.chunks[i].shifts[k]
            base_keys.append(tuple(next(tokens) - shift for _ in setup.chunks[i].key_chars))
        replanned, tables_now = planner.replan(
            request=setup.request, weights=planned.weights, tables=tables, plan=plan,
            base_keys=base_keys, measured_tokens=len(measured), freeze=round_ >= rounds,
        )  # fmt: skip
        if replanned is plan:
            return Verified(plan=plan, tables=tables, rendered=rendered, measured=measured)
        plan, tables = replanned, tables_now
    ids = [setup.chunks[i].chunk.id for i in plan.order]
    raise VerificationError(
        f"re-tokenization did not confirm the padding of chunks {ids} after "
        f"{rounds} repair rounds (tokens merge across chunk boundaries); assemble with "
        "AssemblyOptions(pad=False) or start the chunks with a letter or digit"
    )
