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
or a chunk dropped after a boundary merge (its reason quotes the budget). Every
result's tokenization is cached for the next step.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import replace

import numpy as np

from phaseaware.assembly.inputs.chunks import Chunk
from phaseaware.assembly.inputs.options import AssemblyOptions
from phaseaware.assembly.pipeline import assemble_measured
from phaseaware.assembly.report.prefix import unchanged_prefix_tokens
from phaseaware.assembly.report.result import AssemblyResult, DroppedAfterMerge, shift_positions
from phaseaware.assembly.retokenize.prefix import PrefixEntry, PrefixTokenCache, prefix_cut
from phaseaware.chat.append import AppendLayout, TailLayout
from phaseaware.errors import PhaseawareError
from phaseaware.profiles.model import Profile
from phaseaware.tokenizers.base import Tokenizer

__all__ = ["assemble_tail"]


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
) -> AssemblyResult:
    """``assemble(chunks, chat_format=layout, ...)``, incremental where a sent prompt is cached."""
    fingerprint = tokenizer.fingerprint()
    why = _incremental_blocker(prefix_cache, options, profile)
    if prefix_cache is not None and not why:
        entry = prefix_cache.longest_prefix_of(fingerprint, layout.sent_text)
        if entry is None:
            why = "sent prefix not seen (first call, another conversation, or evicted)"
        else:
            cut, why = prefix_cut(tokenizer, entry.text)
            if cut is not None:
                done, why = _incremental(
                    chunks, tokenizer=tokenizer, layout=layout, question=question,
                    profile=profile, budget_tokens=budget_tokens, options=options,
                    entry=entry, cut=cut,
                )  # fmt: skip
                if done is not None:
                    result, starts = done
                    prefix_cache.put(fingerprint, PrefixEntry(result.prompt, starts))
                    return _since_sent(result, tokenizer, layout, starts)
    result, measured = assemble_measured(
        chunks, tokenizer=tokenizer, chat_format=layout, question=question, profile=profile,
        budget_tokens=budget_tokens, options=options,
    )  # fmt: skip
    if prefix_cache is not None and measured is not None:
        prefix_cache.put(fingerprint, PrefixEntry(result.prompt, _compact(measured.starts)))
    result = replace(result, append_path="full", append_reason=why)
    return _since_sent(result, tokenizer, layout, None if measured is None else measured.starts)


def _since_sent(
    result: AssemblyResult, tokenizer: Tokenizer, layout: AppendLayout, starts: np.ndarray | None
) -> AssemblyResult:
    """``result`` with ``unchanged_sent_tokens``: its ids shared with the sent text's."""
    kept = unchanged_prefix_tokens(tokenizer, result.prompt, layout.sent_text, starts=starts)
    return replace(result, unchanged_sent_tokens=kept)


def _incremental_blocker(
    cache: PrefixTokenCache | None, options: AssemblyOptions, profile: Profile | None
) -> str:
    if cache is None:
        return "no prefix cache (prefix_cache=None)"
    if profile is None:  # the profile's model is offset-exact; the heuristic is not
        return "no profile: the lost-in-the-middle estimate reads positions from the prompt start"
    if options.offsets:
        return "options.offsets: robust copies rewrite the prompt after verification"
    return ""


def _incremental(
    chunks: Sequence[Chunk | str],
    *,
    tokenizer: Tokenizer,
    layout: AppendLayout,
    question: str,
    profile: Profile | None,
    budget_tokens: int,
    options: AssemblyOptions,
    entry: PrefixEntry,
    cut: int,
) -> tuple[tuple[AssemblyResult, np.ndarray] | None, str]:
    k = entry.tokens_before(cut)
    if budget_tokens - k < 1:
        return None, "budget below the sent prefix (the full path reports it)"
    try:
        tail, measured = assemble_measured(
            chunks, tokenizer=tokenizer, chat_format=TailLayout(layout, cut), question=question,
            profile=profile, budget_tokens=budget_tokens - k,
            options=replace(options, position_offset=options.position_offset + k),
        )  # fmt: skip
    except PhaseawareError as exc:
        return None, f"the tail path raised {type(exc).__name__} (the full path reports it)"
    if measured is None:
        return None, "no verified tokenization of the tail"
    if any(isinstance(d, DroppedAfterMerge) for d in tail.dropped):
        return None, "a chunk was dropped after a boundary merge (its reason quotes the budget)"
    result = _absolute(tail, entry.text[:cut], k, options.position_offset)
    starts = np.concatenate([entry.starts[:k], _compact(measured.starts) + cut])
    return (result, _compact(starts)), ""


def _compact(starts: np.ndarray) -> np.ndarray:
    """int32 where it fits (half the memory of int64), else as is."""
    if starts.size == 0 or int(starts[-1]) < 2**31 - 1:
        return starts.astype(np.int32, copy=False)
    return starts


def _absolute(tail: AssemblyResult, head: str, k: int, position_offset: int) -> AssemblyResult:
    """The tail's result as the whole prompt's: ``head`` (k tokens) before it."""
    return replace(
        shift_positions(tail, tokens=k, chars=len(head)),
        prompt=head + tail.prompt,
        position_offset=position_offset,
        unchanged_prefix_tokens=tail.unchanged_prefix_tokens + k,  # k: tokens before the cut
        append_path="incremental",
        append_reason="",
    )
