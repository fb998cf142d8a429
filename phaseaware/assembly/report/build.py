"""Building an ``AssemblyResult`` from a confirmed plan and the measured final prompt.

``build_result`` turns a confirmed plan plus the *measured* tokenization of the
final prompt into an ``AssemblyResult``; every position it reports comes from
that tokenization. ``naive_expected_accuracy`` is the baseline of the same
chunks in the given order, no padding, no repeat, same budget; its positions
are estimated from the in-context per-chunk token counts (the naive prompt is not rendered).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence

import numpy as np

from phaseaware.assembly.plan import planner
from phaseaware.assembly.plan.baseline import naive_baseline
from phaseaware.assembly.plan.planner import Plan
from phaseaware.assembly.prepare.measured_request import Setup
from phaseaware.assembly.prepare.render import CHUNK_SEPARATOR, RenderedContext
from phaseaware.assembly.report.prefix import without_context_tokens
from phaseaware.assembly.report.result import (
    AssemblyResult,
    Dropped,
    Placement,
    RepeatPlacement,
)
from phaseaware.chat.layout import RenderedPrompt
from phaseaware.tokenizers.offsets import TokenStarts

__all__ = ["build_result", "naive_expected_accuracy", "overall_expected_accuracy"]


def _tokens_in(measured: TokenStarts, start: int, end: int) -> int:
    """Tokens whose first character lies in prompt chars ``[start, end)``."""
    return measured.tokens_in(start, end)


def _residues(positions: tuple[int, ...], period: int | None, offset: int) -> tuple[int, ...]:
    """Residues of the model's positions (prompt index + offset); () without a period."""
    return tuple((t + offset) % period for t in positions) if period else ()


def _mean(values: list[float]) -> float | None:
    return sum(values) / len(values) if values else None


def build_result(
    setup: Setup,
    *,
    plan: Plan | None,
    rendered: RenderedContext | None,
    measured: TokenStarts,
    prompt: RenderedPrompt,
    dropped: Mapping[int, str],
) -> AssemblyResult:
    """Measured placements of a confirmed plan (``plan`` None: no chunk admitted).

    ``measured`` is the tokenization of ``prompt.text``; ``rendered`` the
    context of ``plan``; ``dropped`` maps input indices to reasons.
    """
    length = len(measured)
    profile = setup.profile
    period = profile.period if profile is not None else setup.options.period
    shift = setup.options.position_offset  # model position = prompt token index + shift
    rel = planner.position_reliability(profile, length=length, offset=shift)
    prep = setup.chunks
    placements: list[Placement] = []
    accuracy: dict[int, float | None] = {}
    padding = end_padding = repeated = 0
    repeat = None
    if plan is not None and rendered is not None:
        offset = len(setup.frame.prefix)
        repeat = _repeat_placement(setup, plan, rendered, measured, rel, period)
        placements, padding = _placements(setup, plan, rendered, measured, period, repeat)
        accuracy = {plan.order[p.order]: p.expected_accuracy for p in placements}
        if rendered.end_span is not None:
            end_padding = _tokens_in(measured, *(offset + c for c in rendered.end_span))
            padding += end_padding
        if rendered.repeat is not None and rendered.repeat_start is not None:
            start = offset + rendered.repeat_start
            end = start + len(rendered.repeat.text)
            repeated = _tokens_in(measured, start - len(CHUNK_SEPARATOR), end)
    effect = profile.length_residue_accuracy if profile is not None else None
    return AssemblyResult(
        prompt=prompt.text,
        messages=prompt.messages,
        context=rendered.text if rendered is not None else "",
        token_count=length,
        placements=tuple(placements),
        repeat=repeat,
        padding_tokens=padding,
        end_padding_tokens=end_padding,
        repeated_tokens=repeated,
        dropped=tuple(
            Dropped(prep[i].chunk.id or "", reason) for i, reason in sorted(dropped.items())
        ),
        expected_accuracy=_overall(setup, accuracy),
        naive_expected_accuracy=_naive(setup),
        profile=profile.model if profile is not None else None,
        period=period,
        length_residue=(length + shift) % effect.period if effect is not None else None,
        tokenizer=setup.tokenizer.spec,
        fingerprint=setup.tokenizer.fingerprint(),
        layout=setup.layout.name,
        position_offset=shift,
        neutralized=setup.neutralized,
        tokenizer_mismatch_allowed=setup.tokenizer_mismatch_allowed,
        verification=measured.verification,
        unchanged_prefix_tokens=without_context_tokens(setup, prompt.text, starts=measured.starts),
    )


def _pad_tokens(measured: TokenStarts, offset: int, spans: Sequence[tuple[int, int]]) -> list[int]:
    """``_tokens_in`` of each pad span (context chars, prompt ``offset``), one numpy pass."""
    if not spans:
        return []
    edges = np.asarray(spans, dtype=np.int64) + offset
    found = np.searchsorted(measured.starts, edges, side="left")
    counts: list[int] = (found[:, 1] - found[:, 0]).tolist()
    return counts


def _placements(
    setup: Setup,
    plan: Plan,
    rendered: RenderedContext,
    measured: TokenStarts,
    period: int | None,
    repeat: RepeatPlacement | None,
) -> tuple[list[Placement], int]:
    """(measured placement of every ordered chunk, their pad tokens), one lookup pass.

    Every key's token comes from one vectorised lookup; accuracies are the mean
    of ``planner.position_reliability`` over a chunk's keys (summed in key order),
    at least the repeat's for the repeated chunk.
    """
    prep, offset = setup.chunks, len(setup.frame.prefix)
    ranks = {i: r for r, i in enumerate(planner.relevance_rank([p.chunk.score for p in prep]))}
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
    flat = [c for keys in key_chars for c in keys]
    firsts = measured.tokens_at_chars(begins)
    tokens = measured.tokens_at_chars(flat)
    lasts: list[int] = np.searchsorted(
        measured.starts, np.asarray(ends, dtype=np.int64) - 1, side="right"
    ).tolist()
    shift = setup.options.position_offset
    residues: list[int] = (
        ((np.asarray(tokens, dtype=np.int64) + shift) % period).tolist() if period else []
    )
    values = planner.position_reliabilities(
        setup.profile, tokens, length=len(measured), offset=shift
    )
    pad_counts = iter(_pad_tokens(measured, offset, rendered.pad_spans))
    pad_spans = iter(rendered.pad_spans)
    floor = repeat.expected_accuracy or 0.0 if repeat is not None else None
    out: list[Placement] = []
    padding = at = 0
    for j, (i, k) in enumerate(zip(plan.order, plan.pads, strict=True)):
        pad_chars = pad_tokens = 0
        if k:
            span = next(pad_spans)
            pad_chars, pad_tokens = span[1] - span[0], next(pad_counts)
        padding += pad_tokens
        n = len(key_chars[j])
        accuracy = sum(values[at : at + n]) / n if n else None
        if floor is not None and i == plan.repeat and accuracy is not None:
            accuracy = max(accuracy, floor)
        chunk = prep[i].chunk
        out.append(
            Placement(
                segment_char_start=begins[j] - pad_chars,
                chunk_id=chunk.id or "",
                order=j,
                rank=ranks[i],
                score=chunk.score,
                token_start=firsts[j],
                token_end=lasts[j],
                char_start=begins[j],
                char_end=ends[j],
                padding_tokens=pad_tokens,
                key_token_positions=tuple(tokens[at : at + n]),
                key_char_offsets=key_chars[j],
                residues=tuple(residues[at : at + n]),
                expected_accuracy=accuracy,
            )
        )
        at += n
    return out, padding


def _repeat_placement(
    setup: Setup,
    plan: Plan,
    rendered: RenderedContext,
    measured: TokenStarts,
    rel: Callable[[int], float],
    period: int | None,
) -> RepeatPlacement | None:
    block = rendered.repeat
    if plan.repeat is None or block is None or rendered.repeat_start is None:
        return None
    start = len(setup.frame.prefix) + rendered.repeat_start
    end = start + len(block.text)
    chars = tuple(start + c for c in block.key_chars)
    positions = tuple(measured.token_at_char(c) for c in chars)
    span = measured.token_span(start, end)
    return RepeatPlacement(
        chunk_id=setup.chunks[plan.repeat].chunk.id or "",
        text=block.text,
        token_start=span[0],
        token_end=span[1],
        key_token_positions=positions,
        key_char_offsets=chars,
        residues=_residues(positions, period, setup.options.position_offset),
        expected_accuracy=_mean([rel(t) for t in positions]),
    )


def overall_expected_accuracy(setup: Setup, accuracy: Mapping[int, float | None]) -> float | None:
    """Relevance-weighted mean of per-chunk accuracies (input index -> accuracy)."""
    return _overall(setup, accuracy)


def _overall(setup: Setup, accuracy: Mapping[int, float | None]) -> float | None:
    """Relevance-weighted mean accuracy over keyed, non-empty chunks (dropped → 0)."""
    total = weight_sum = 0.0
    for i, prep in enumerate(setup.chunks):
        if prep.empty or not prep.key_chars:
            continue
        weight_sum += setup.weights[i]
        total += setup.weights[i] * (accuracy.get(i) or 0.0)
    return total / weight_sum if weight_sum > 0 else None


def naive_expected_accuracy(setup: Setup) -> float | None:
    """The naive baseline's expected accuracy at ``setup.options.position_offset``."""
    return _naive(setup)


def _naive(setup: Setup) -> float | None:
    """Same chunks, given order, no padding or repeat, same budget (estimated positions)."""
    prep, frame = setup.chunks, setup.frame
    base = naive_baseline(
        scores=[p.chunk.score for p in prep],
        sizes=[p.tokens for p in prep],
        empty=[p.empty for p in prep],
        key_offsets=[p.key_tokens for p in prep],
        prefix_tokens=frame.prefix_tokens,
        suffix_tokens=frame.suffix_tokens,
        separator_tokens=frame.separator_tokens,
        budget=setup.budget,
    )
    values = planner.position_reliabilities(
        setup.profile, base.key_positions, length=base.length, offset=setup.options.position_offset
    )
    accuracy: dict[int, float | None] = {}
    at = 0
    for i, n in zip(base.admitted, base.key_counts, strict=True):
        accuracy[i] = sum(values[at : at + n]) / n if n else None
        at += n
    return _overall(setup, accuracy)
