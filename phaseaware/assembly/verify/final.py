"""The final prompt: the offset-robust copies, then the prompt rendered and scanned once.

``confirm_prompt`` turns what the fixed point confirmed into the prompt that is sent:
the context (with the copies below, under ``AssemblyOptions.offsets``) rendered around
its frame (``prefix + context + suffix``, checked) and scanned for control strings
beyond the template's (chunk text, copies included, is untrusted).

With ``AssemblyOptions.offsets`` the server's offset is any of a set, so the top evidence
(the repeated chunk, else the most relevant keyed chunk) is restated in copies
``SEP + pad + evidence`` right after it (after its repeat when it is repeated) until every
offset in the set has a copy on a reliable residue (``plan.robust``). Each copy is planned
the way a chunk pad is: the prompt with the copy unpadded is tokenized once, and the pad
that moves the copy's key onto the wanted residue is read off the filler's pad table
(``plan.robust.copy_pad``); the padded prompt is tokenized to confirm it (the key on the
planned token, the prompt the planned length). Where the table does not hold there (a
boundary merge) or the budget is near, the pads are tried one by one, each confirmed by
re-tokenizing: the same pad, found the slow way. The prompt with the copies is
tokenized once more for the report.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

from phaseaware.assembly.inputs.untrusted import confirm
from phaseaware.assembly.plan.planner import PlanStart
from phaseaware.assembly.plan.robust import copy_pad, covering_residues, reliable_residues
from phaseaware.assembly.prepare.measured_request import Setup
from phaseaware.assembly.prepare.render import (
    CHUNK_SEPARATOR,
    RepeatBlock,
    pad_block,
    render_prompt,
)
from phaseaware.assembly.retokenize.windowed import full_starts
from phaseaware.assembly.verify.fixed_point import Fixed, Verified
from phaseaware.chat.layout import RenderedPrompt
from phaseaware.errors import InputError
from phaseaware.tokenizers.base import TokenizedText
from phaseaware.tokenizers.offsets import TokenStarts

__all__ = ["Confirmed", "Copies", "confirm_prompt"]


@dataclass(frozen=True)
class Copies:
    """The context with the copies and the final prompt's tokenization; the copied chunk
    (input index; None: no keyed chunk admitted), the prompt char of the first key of each
    copy of it (and whether robustness added it), and the reliable residues."""

    context: str
    measured: TokenizedText
    top: int | None
    chars: tuple[tuple[int, bool], ...]
    reliable: frozenset[int]


@dataclass(frozen=True)
class Confirmed:
    """What verification hands the report: the final ``prompt``; ``measured``, the
    tokenization of the prompt without copies (the fixed point's, or one encode when no
    chunk was admitted); the ``verified`` plan, the dropped chunks and those dropped
    ``after_merge`` (``Fixed``); and the ``copies`` (``options.offsets`` only)."""

    prompt: RenderedPrompt
    measured: TokenStarts
    verified: Verified | None
    dropped: Mapping[int, str]
    after_merge: frozenset[int]
    copies: Copies | None


def confirm_prompt(
    setup: Setup, planned: PlanStart, fixed: Fixed, block: RepeatBlock | None
) -> Confirmed:
    """The final prompt of what the fixed point confirmed (copies of ``block``, the
    evidence's, added first under ``options.offsets``), rendered and scanned."""
    verified, frame = fixed.verified, setup.frame
    placed = _copies(setup, planned, verified, block) if setup.options.offsets else None
    context = verified.rendered.text if verified is not None else None
    context = placed[0] if placed is not None else context
    if context is None:  # no chunk admitted
        prompt = setup.layout.render(system=setup.system, context="", question=setup.question)
    else:
        prompt = render_prompt(
            setup.layout, system=setup.system, question=setup.question, context=context,
            prefix=frame.prefix, suffix=frame.suffix,
        )  # fmt: skip
    if setup.scanner is not None:  # no control string beyond the template's: scanned
        confirm(setup.scanner, frame=frame.prefix + frame.suffix, prompt=prompt.text)
    copies = None
    if placed is not None:
        copies = Copies(
            context=placed[0],
            measured=setup.tokenizer.tokenize(prompt.text),
            top=placed[1],
            chars=placed[2],
            reliable=placed[3],
        )
    return Confirmed(
        prompt=prompt,
        measured=(
            verified.measured if verified is not None else full_starts(setup.tokenizer, prompt.text)
        ),
        verified=verified,
        dropped=fixed.dropped,
        after_merge=fixed.after_merge,
        copies=copies,
    )


def _copies(
    setup: Setup, planned: PlanStart, verified: Verified | None, block: RepeatBlock | None
) -> tuple[str, int | None, tuple[tuple[int, bool], ...], frozenset[int]]:
    """(context with copies of ``block`` so every offset in ``options.offsets`` has one on a
    reliable residue within the budget, the copied chunk, each copy's first key char and
    whether it was added, the reliable residues)."""
    options, profile, filler = setup.options, setup.profile, setup.filler
    if profile is None or filler is None:
        raise InputError(
            "options.offsets needs a profile and padding (pad=true): robust placement "
            "aims copies at the profile's reliable residues"
        )
    period, tokenizer, budget = profile.period, setup.tokenizer, setup.budget
    reliable = reliable_residues(
        [profile.residue_reliability(r) for r in range(period)], tolerance=options.robust_tolerance
    )
    prefix, suffix = setup.frame.prefix, setup.frame.suffix
    context = verified.rendered.text if verified is not None else ""
    top, added, insert_at = None, "", len(context)
    chars: list[tuple[int, bool]] = []
    if verified is not None and block is not None and planned.evidence in verified.plan.order:
        plan, rendered, top = verified.plan, verified.rendered, planned.evidence
        start = rendered.chunk_starts[plan.order.index(top)]
        chars.append((len(prefix) + start + setup.chunks[top].key_chars[0], False))
        insert_at = start + len(setup.chunks[top].chunk.text)
        if plan.repeat == top and rendered.repeat is not None and rendered.repeat_start is not None:
            chars.append(
                (len(prefix) + rendered.repeat_start + rendered.repeat.key_chars[0], False)
            )
            insert_at = rendered.repeat_start + len(rendered.repeat.text)
        existing = [verified.measured.token_at_char(c) % period for c, _ in chars]
        wanted = covering_residues(
            existing=existing, offsets=options.offsets or (), period=period, reliable=reliable
        )
        head, tail = prefix + context[:insert_at], context[insert_at:] + suffix
        shifts, tries = filler.chunk_pad.shifts, 2 * period

        def trial(k: int) -> tuple[str, int, TokenizedText]:
            """(the copy with ``k`` pad units, its key's prompt char, the prompt tokenized)."""
            piece = CHUNK_SEPARATOR + pad_block(filler.unit, k) + block.text
            key = len(head) + len(added) + len(piece) - len(block.text) + block.key_chars[0]
            return piece, key, tokenizer.tokenize(head + added + piece + tail)

        for residue in wanted:
            piece, key, measured = trial(0)
            k = copy_pad(
                key_token=measured.token_at_char(key), tokens=len(measured), shifts=shifts,
                residue=residue, period=period, budget=budget, tries=tries,
            )  # fmt: skip
            held = k == 0
            if k is not None and k > 0:
                planned_key = measured.token_at_char(key) + shifts[k] - shifts[0]
                planned_tokens = len(measured) + shifts[k] - shifts[0]
                piece, key, measured = trial(k)
                got = measured.token_at_char(key)
                held = got == planned_key and got % period == residue
                held = held and len(measured) == planned_tokens <= budget
            if not held:  # the table does not hold here: try each pad, confirmed one by one
                k = None
                for n in range(tries):
                    piece, key, measured = trial(n)
                    if len(measured) > budget:
                        break
                    if measured.token_at_char(key) % period == residue:
                        k = n
                        break
            if k is not None:
                added += piece
                chars.append((key, True))
    return context[:insert_at] + added + context[insert_at:], top, tuple(chars), reliable
