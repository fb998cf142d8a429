"""Append alignment whose cost is the new message, not the conversation.

:func:`assemble_tail` runs ``assemble`` for an :class:`~phaseaware.chat.append.AppendLayout`
(sent conversation + one new message) re-using the verified tokenization of a
prompt sent earlier:

1. the longest prompt in the :class:`~.retokenize.prefix.PrefixTokenCache` that
   the sent text starts with (the previous step's prompt: the sent text is that
   prompt plus the assistant's reply);
2. a cut ``p`` near its end (:func:`~.retokenize.prefix.prefix_cut`): the tokens
   of the whole new prompt are its cached tokens before ``p`` (``k`` of them)
   followed by those of the tail ``prompt[p:]``;
3. ``assemble`` on the tail alone (:class:`~phaseaware.chat.append.TailLayout`),
   with ``position_offset + k`` (residues, accuracies, length residue are those
   of the absolute positions) and ``budget - k``; the result is shifted back:
   token indices ``+ k``, char offsets ``+ p``, ``prompt`` the whole text.

Equal to the full path by construction (the tail's tokens ARE the prompt's
tokens there), and checked by ``tests/unit/test_append_incremental.py`` over
random tool loops. Where it cannot hold, the full path runs and the result says
why (``append_path == "full"``, ``append_reason``): no cached prefix, no proven
cut for the tokenizer, no profile (the lost-in-the-middle estimate used
without one reads positions from the prompt's start, not absolute ones), ``options.offsets`` (robust copies rewrite the prompt
after verification), an error (the full path raises it with its own numbers),
a chunk dropped after a boundary merge (its reason quotes the budget), or a
chat format that rewrites sent text (the caller's reason). Every result's
tokenization is cached for the next step.

One pipeline call site: the ways to tokenize (the tail from a cut, then the
whole conversation) are tried in order and the first that holds is reported,
its ``unchanged_*`` figures counted by the report stage (``report.prefix``).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, replace

import numpy as np

from phaseaware.assembly.inputs.chunks import Chunk
from phaseaware.assembly.inputs.options import AssemblyOptions
from phaseaware.assembly.pipeline import assemble_measured
from phaseaware.assembly.report.result import AssemblyResult, DroppedAfterMerge, shift_positions
from phaseaware.assembly.retokenize.prefix import PrefixEntry, PrefixTokenCache, prefix_cut
from phaseaware.chat.append import AppendLayout, TailLayout
from phaseaware.errors import PhaseawareError
from phaseaware.profiles.model import Profile
from phaseaware.tokenizers.base import Tokenizer

__all__ = ["assemble_tail"]

_NO_STARTS = np.zeros(0, dtype=np.int32)


@dataclass(frozen=True)
class _Way:
    """One way to tokenize the conversation: from char ``cut`` on (0: the whole), after
    ``head_starts`` (the cached tokens before the cut, ``k`` of them)."""

    cut: int
    head_starts: np.ndarray

    @property
    def k(self) -> int:
        return int(self.head_starts.size)


_WHOLE = _Way(cut=0, head_starts=_NO_STARTS)


def assemble_tail(
    chunks: Sequence[Chunk | str],
    *,
    tokenizer: Tokenizer,
    layout: AppendLayout,
    question: str,
    profile: Profile | None,
    budget_tokens: int,
    options: AssemblyOptions,
    prefix_cache: PrefixTokenCache | None,
    full_because: str = "",
) -> AssemblyResult:
    """``assemble(chunks, chat_format=layout, ...)``, incremental where a sent prompt is cached.

    ``full_because``: why the whole conversation must be assembled (the caller knows:
    the chat format rewrites sent text); it becomes ``append_reason``.
    """
    fingerprint = tokenizer.fingerprint()
    tail, why = (
        (None, full_because)
        if full_because
        else _tail_way(prefix_cache, fingerprint, tokenizer, layout, profile, options)
    )
    if tail is not None and budget_tokens - tail.k < 1:
        tail, why = None, "budget below the sent prefix (the full path reports it)"
    for way in (tail, _WHOLE) if tail is not None else (_WHOLE,):
        try:
            result, measured = assemble_measured(
                chunks, tokenizer=tokenizer,
                chat_format=TailLayout(layout, way.cut) if way.cut else layout,
                question=question, profile=profile, budget_tokens=budget_tokens - way.k,
                options=replace(options, position_offset=options.position_offset + way.k),
            )  # fmt: skip
        except PhaseawareError as exc:
            if way is _WHOLE:
                raise
            why = f"the tail path raised {type(exc).__name__} (the full path reports it)"
            continue
        rejected = "" if way is _WHOLE else _tail_rejected(result, measured is not None)
        if not rejected:
            break
        why = rejected
    if way is not _WHOLE:  # the tail's result as the whole prompt's
        result = _absolute(result, layout.sent_text[: way.cut], way.k, options.position_offset)
    else:
        result = replace(result, append_path="full", append_reason=why)
    if prefix_cache is not None and measured is not None:
        starts = np.concatenate([way.head_starts, _compact(measured.starts) + way.cut])
        prefix_cache.put(fingerprint, PrefixEntry(result.prompt, _compact(starts)))
    return result


def _tail_way(
    cache: PrefixTokenCache | None,
    fingerprint: str,
    tokenizer: Tokenizer,
    layout: AppendLayout,
    profile: Profile | None,
    options: AssemblyOptions,
) -> tuple[_Way | None, str]:
    """The tail from a cut of the longest cached prompt the sent text starts with; or why not."""
    if cache is None:
        return None, "no prefix cache (prefix_cache=None)"
    if profile is None:  # the profile's model is offset-exact; the heuristic is not
        return (
            None,
            "no profile: the lost-in-the-middle estimate reads positions from the prompt start",
        )
    if options.offsets:
        return None, "options.offsets: robust copies rewrite the prompt after verification"
    entry = cache.longest_prefix_of(fingerprint, layout.sent_text)
    if entry is None:
        return None, "sent prefix not seen (first call, another conversation, or evicted)"
    cut, why = prefix_cut(tokenizer, entry.text)
    if cut is None:
        return None, why
    return _Way(cut=cut, head_starts=entry.starts[: entry.tokens_before(cut)]), ""


def _tail_rejected(tail: AssemblyResult, measured: bool) -> str:
    """Why the tail's result cannot stand for the whole prompt's ("" where it can)."""
    if not measured:
        return "no verified tokenization of the tail"
    if any(isinstance(d, DroppedAfterMerge) for d in tail.dropped):
        return "a chunk was dropped after a boundary merge (its reason quotes the budget)"
    return ""


def _compact(starts: np.ndarray) -> np.ndarray:
    """int32 where it fits (half the memory of int64), else as is."""
    if starts.size == 0 or int(starts[-1]) < 2**31 - 1:
        return starts.astype(np.int32, copy=False)
    return starts


def _absolute(tail: AssemblyResult, head: str, k: int, position_offset: int) -> AssemblyResult:
    """The tail's result as the whole prompt's: ``head`` (k tokens) before it; the
    cut is a cut of both the prompt and the sent text, so both cache figures grow by k."""
    return replace(
        shift_positions(tail, tokens=k, chars=len(head)),
        prompt=head + tail.prompt,
        position_offset=position_offset,
        unchanged_prefix_tokens=tail.unchanged_prefix_tokens + k,
        unchanged_sent_tokens=(
            tail.unchanged_sent_tokens + k if tail.unchanged_sent_tokens is not None else None
        ),
        append_path="incremental",
        append_reason="",
    )
