"""Rendering: the context text of a plan, and the prompt around it.

Context layout (``CHUNK_SEPARATOR`` = ``"\\n\\n"``)::

    [pad] chunk_1 SEP [pad] chunk_2 SEP ... [pad] chunk_n [SEP repeat-block] [end pad]

    pad = filler_unit * k + "\\n"    end pad = "\\n" + filler_unit * k

Every admitted chunk text appears verbatim once (plus the declared repeat);
``render_prompt`` keeps the layout invariant ``prompt == prefix + context +
suffix`` (``TemplateError`` otherwise). Character offsets only: token
positions come from re-tokenizing the prompt (``verify``).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from phaseaware.assembly.evidence.keys import evidence_snippet
from phaseaware.assembly.plan.order import Plan
from phaseaware.chat.layout import PromptLayout, RenderedPrompt
from phaseaware.errors import TemplateError

__all__ = [
    "CHUNK_SEPARATOR",
    "PAD_TERMINATOR",
    "pad_block",
    "end_pad",
    "RepeatBlock",
    "repeat_block",
    "RenderedContext",
    "render_context",
    "render_prompt",
]

CHUNK_SEPARATOR = "\n\n"
PAD_TERMINATOR = "\n"


def pad_block(unit: str, k: int) -> str:
    """Pad text inserted right before a chunk's text (``""`` for k = 0)."""
    return unit * k + PAD_TERMINATOR if k > 0 else ""


def end_pad(unit: str, k: int) -> str:
    """Pad text appended at the end of the context (``""`` for k = 0)."""
    return PAD_TERMINATOR + unit * k if k > 0 else ""


@dataclass(frozen=True)
class RepeatBlock:
    """The restated evidence: label plus a snippet of the chunk's text."""

    text: str
    key_chars: tuple[int, ...]  # char offsets of the keys in ``text``


def repeat_block(text: str, key_chars: Sequence[int], *, label: str, max_chars: int) -> RepeatBlock:
    """``label`` plus the sentence of ``text`` around its first key (at most ``max_chars``)."""
    start, end = evidence_snippet(text, key_chars[0], max_chars=max_chars)
    keys = tuple(len(label) + c - start for c in key_chars if start <= c < end)
    return RepeatBlock(text=label + text[start:end], key_chars=keys)


@dataclass(frozen=True)
class RenderedContext:
    """The context text of a plan and where each part of it starts (characters)."""

    text: str
    chunk_starts: tuple[int, ...]  # each ordered chunk's first char in the context
    pad_spans: tuple[tuple[int, int], ...]  # [start, end) of each non-empty chunk pad
    repeat: RepeatBlock | None
    repeat_start: int | None  # the repeat block's first char (after its separator)
    end_span: tuple[int, int] | None  # [start, end) of the end pad; None: no end pad


def render_context(
    *, texts: Sequence[str], plan: Plan, unit: str, repeat: RepeatBlock | None
) -> RenderedContext:
    """The context of ``plan`` over chunk ``texts`` (input order) with filler ``unit``.

    ``repeat`` is the block of ``plan.repeat`` (None exactly when it is None).
    """
    parts: list[str] = []
    pos = 0
    starts: list[int] = []
    pad_spans: list[tuple[int, int]] = []
    for j, (i, k) in enumerate(zip(plan.order, plan.pads, strict=True)):
        if j:
            parts.append(CHUNK_SEPARATOR)
            pos += len(CHUNK_SEPARATOR)
        if k:
            pad = pad_block(unit, k)
            pad_spans.append((pos, pos + len(pad)))
            parts.append(pad)
            pos += len(pad)
        starts.append(pos)
        parts.append(texts[i])
        pos += len(texts[i])
    repeat_start = None
    if repeat is not None:
        parts.append(CHUNK_SEPARATOR)
        repeat_start = pos + len(CHUNK_SEPARATOR)
        parts.append(repeat.text)
        pos = repeat_start + len(repeat.text)
    end_span = None
    if plan.end_pad:
        pad = end_pad(unit, plan.end_pad)
        end_span = (pos, pos + len(pad))
        parts.append(pad)
    return RenderedContext(
        text="".join(parts),
        chunk_starts=tuple(starts),
        pad_spans=tuple(pad_spans),
        repeat=repeat,
        repeat_start=repeat_start,
        end_span=end_span,
    )


def render_prompt(
    layout: PromptLayout,
    *,
    system: str | None,
    question: str,
    context: str,
    prefix: str,
    suffix: str,
) -> RenderedPrompt:
    """The full prompt of ``context``; ``TemplateError`` unless it is prefix + context + suffix."""
    rendered = layout.render(system=system, context=context, question=question)
    if rendered.text != prefix + context + suffix:
        raise TemplateError(
            f"layout {layout.name!r} rendered a prompt that is not prefix + context "
            "+ suffix; use another chat format (chat_format)"
        )
    return rendered
