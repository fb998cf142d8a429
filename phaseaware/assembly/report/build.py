"""Building an ``AssemblyResult`` from a confirmed plan and the measured final prompt.

``build_result`` turns what verification confirmed (the plan, the final prompt and
its *measured* tokenization) into an ``AssemblyResult``; every position it reports
comes from that tokenization. The naive baseline's accuracy (same chunks in the
given order, no padding, no repeat, same budget) was planned once by
``planner.start_plan`` and is reported as handed over.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from phaseaware.assembly.plan.planner import PlanStart
from phaseaware.assembly.plan.reliability import position_reliabilities, weighted_accuracy
from phaseaware.assembly.prepare.measured_request import Setup
from phaseaware.assembly.prepare.render import CHUNK_SEPARATOR
from phaseaware.assembly.report.prefix import cache_figures
from phaseaware.assembly.report.result import (
    AssemblyResult,
    Dropped,
    DroppedAfterMerge,
    Placement,
    RepeatPlacement,
)
from phaseaware.assembly.report.robust import robust_result
from phaseaware.assembly.verify.final import Confirmed
from phaseaware.assembly.verify.fixed_point import Verified
from phaseaware.tokenizers.offsets import TokenStarts

__all__ = ["build_result"]


@dataclass(frozen=True)
class _Spans:
    """Where a confirmed context's parts sit in the measured prompt (characters, tokens),
    read off its tokenization in one pass; per ordered chunk unless named otherwise."""

    begins: list[int]
    ends: list[int]
    key_chars: list[tuple[int, ...]]
    firsts: list[int]
    lasts: list[int]
    key_tokens: list[int]  # every chunk's keys, flat, in order
    pad_counts: list[int]  # tokens of each non-empty chunk pad
    repeat_chars: tuple[int, ...]
    repeat_tokens: tuple[int, ...]
    repeat_span: tuple[int, int] | None
    end_padding: int
    repeated: int


def build_result(setup: Setup, planned: PlanStart, confirmed: Confirmed) -> AssemblyResult:
    """Measured placements of what verification ``confirmed`` (no plan: no chunk admitted);
    ``planned``: the request's relevance weights and order, and naive baseline, as planned.
    With ``confirmed.copies`` (``options.offsets``) ``report.robust`` reports per offset,
    on the final prompt.

    Every position comes from ``confirmed.measured``: first all lookups (``_spans``),
    then one reliability pass over every key (the repeat's included), then the report.
    """
    measured, prompt, verified = confirmed.measured, confirmed.prompt, confirmed.verified
    profile = setup.profile
    shift = setup.options.position_offset  # model position = prompt token index + shift
    length = len(measured)
    period = profile.period if profile is not None else setup.options.period
    spans, placements, repeat, accuracy = (
        _placed(setup, planned, verified, measured, period)
        if verified is not None
        else (None, [], None, {})
    )
    prep = setup.chunks
    effect = profile.length_residue_accuracy if profile is not None else None
    pad_sum = sum(spans.pad_counts) if spans is not None else 0
    end_padding = spans.end_padding if spans is not None else 0
    unchanged, since_sent = cache_figures(setup, prompt.text, starts=measured.starts)
    result = AssemblyResult(
        prompt=prompt.text,
        messages=prompt.messages,
        context=verified.rendered.text if verified is not None else "",
        token_count=length,
        placements=tuple(placements),
        repeat=repeat,
        padding_tokens=pad_sum + end_padding,
        end_padding_tokens=end_padding,
        repeated_tokens=spans.repeated if spans is not None else 0,
        dropped=tuple(
            (DroppedAfterMerge if i in confirmed.after_merge else Dropped)(
                prep[i].chunk.id or "", reason
            )
            for i, reason in sorted(confirmed.dropped.items())
        ),
        expected_accuracy=weighted_accuracy(
            weights=planned.weights,
            keyed=[not p.empty and bool(p.key_chars) for p in prep],
            accuracy=accuracy,
        ),
        naive_expected_accuracy=planned.naive,
        profile=profile.model if profile is not None else None,
        period=period,
        length_residue=(length + shift) % effect.period if effect is not None else None,
        tokenizer=setup.tokenizer.spec,
        fingerprint=setup.tokenizer.fingerprint(),
        chat_format=setup.layout.name,
        position_offset=shift,
        neutralized=setup.neutralized,
        tokenizer_mismatch_allowed=setup.tokenizer_mismatch_allowed,
        merged_duplicates=setup.merged,
        verification=measured.verification,
        unchanged_prefix_tokens=unchanged,
        unchanged_sent_tokens=since_sent,
    )
    copies = confirmed.copies
    return robust_result(setup, planned, result, copies) if copies is not None else result


def _spans(setup: Setup, verified: Verified, measured: TokenStarts) -> _Spans:
    """Every token lookup the report needs, on ``measured`` (vectorised where many)."""
    plan, rendered = verified.plan, verified.rendered
    prep, offset = setup.chunks, len(setup.frame.prefix)
    begins = [offset + start for start in rendered.chunk_starts]
    ends = [b + len(prep[i].chunk.text) for b, i in zip(begins, plan.order, strict=True)]
    if any(e <= b for b, e in zip(begins, ends, strict=True)) or (
        ends and max(ends) > measured.text_length
    ):  # the scalar lookup names the bad span
        for b, e in zip(begins, ends, strict=True):
            measured.token_span(b, e)
    key_chars = [
        tuple([b + c for c in prep[i].key_chars]) for b, i in zip(begins, plan.order, strict=True)
    ]
    pad_counts: list[int] = []
    if rendered.pad_spans:
        edges = np.asarray(rendered.pad_spans, dtype=np.int64) + offset
        found = np.searchsorted(measured.starts, edges, side="left")
        pad_counts = (found[:, 1] - found[:, 0]).tolist()
    block, repeat_span, repeated = rendered.repeat, None, 0
    repeat_chars: tuple[int, ...] = ()
    repeat_tokens: tuple[int, ...] = ()
    if block is not None and rendered.repeat_start is not None:
        start = offset + rendered.repeat_start
        end = start + len(block.text)
        if plan.repeat is not None:
            repeat_chars = tuple(start + c for c in block.key_chars)
            repeat_tokens = tuple(measured.token_at_char(c) for c in repeat_chars)
            repeat_span = measured.token_span(start, end)
        repeated = measured.tokens_in(start - len(CHUNK_SEPARATOR), end)
    end_span = rendered.end_span
    return _Spans(
        begins=begins,
        ends=ends,
        key_chars=key_chars,
        firsts=measured.tokens_at_chars(begins),
        lasts=np.searchsorted(
            measured.starts, np.asarray(ends, dtype=np.int64) - 1, side="right"
        ).tolist(),
        key_tokens=measured.tokens_at_chars([c for keys in key_chars for c in keys]),
        pad_counts=pad_counts,
        repeat_chars=repeat_chars,
        repeat_tokens=repeat_tokens,
        repeat_span=repeat_span,
        end_padding=(
            measured.tokens_in(offset + end_span[0], offset + end_span[1])
            if end_span is not None
            else 0
        ),
        repeated=repeated,
    )


def _placed(
    setup: Setup,
    planned: PlanStart,
    verified: Verified,
    measured: TokenStarts,
    period: int | None,
) -> tuple[_Spans, list[Placement], RepeatPlacement | None, dict[int, float | None]]:
    """(the spans read off ``measured``, the placement of every ordered chunk, the repeat's,
    accuracy by input index): all lookups first, then one reliability pass over every
    key, the repeat's last. A chunk's accuracy is the mean over its keys (summed in key
    order), at least the repeat's for the repeated chunk.
    """
    spans = _spans(setup, verified, measured)
    shift = setup.options.position_offset
    values = position_reliabilities(
        setup.profile,
        [*spans.key_tokens, *spans.repeat_tokens],
        length=len(measured),
        offset=shift,
    )
    plan, rendered, prep = verified.plan, verified.rendered, setup.chunks
    tokens, n_keys = spans.key_tokens, len(spans.key_tokens)
    ranks = {i: r for r, i in enumerate(planned.ranked)}
    repeat = None
    if spans.repeat_span is not None and rendered.repeat is not None and plan.repeat is not None:
        positions = spans.repeat_tokens
        repeat_values = values[n_keys:]
        repeat = RepeatPlacement(
            chunk_id=prep[plan.repeat].chunk.id or "",
            text=rendered.repeat.text,
            token_start=spans.repeat_span[0],
            token_end=spans.repeat_span[1],
            key_token_positions=positions,
            key_char_offsets=spans.repeat_chars,
            residues=tuple((t + shift) % period for t in positions) if period else (),
            expected_accuracy=sum(repeat_values) / len(repeat_values) if repeat_values else None,
        )
    residues: list[int] = (
        ((np.asarray(tokens, dtype=np.int64) + shift) % period).tolist() if period else []
    )
    pad_counts, pad_spans = iter(spans.pad_counts), iter(rendered.pad_spans)
    floor = repeat.expected_accuracy or 0.0 if repeat is not None else None
    out: list[Placement] = []
    accuracy: dict[int, float | None] = {}
    at = 0
    for j, (i, k) in enumerate(zip(plan.order, plan.pads, strict=True)):
        pad_chars = pad_tokens = 0
        if k:
            span = next(pad_spans)
            pad_chars, pad_tokens = span[1] - span[0], next(pad_counts)
        n = len(spans.key_chars[j])
        value = sum(values[at : at + n]) / n if n else None
        if floor is not None and i == plan.repeat and value is not None:
            value = max(value, floor)
        chunk = prep[i].chunk
        out.append(
            Placement(
                segment_char_start=spans.begins[j] - pad_chars,
                chunk_id=chunk.id or "",
                order=j,
                rank=ranks[i],
                score=chunk.score,
                token_start=spans.firsts[j],
                token_end=spans.lasts[j],
                char_start=spans.begins[j],
                char_end=spans.ends[j],
                padding_tokens=pad_tokens,
                key_token_positions=tuple(tokens[at : at + n]),
                key_char_offsets=spans.key_chars[j],
                residues=tuple(residues[at : at + n]),
                expected_accuracy=value,
            )
        )
        accuracy[i] = value
        at += n
    return spans, out, repeat, accuracy
