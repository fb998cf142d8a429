"""A request checked and measured in context: the immutable input of planning.

``prepare`` validates the caller's arguments, builds the layout (a chat format's
single-turn conversation, or the caller's layout), splits it around the context, measures every chunk in context and qualifies the filler. The
resulting ``Setup`` never changes; its ``request`` is what the planner reads
(``planner.PlanInput``: numbers and flags only). ``repeat_offer`` measures the
repeat block of the candidate the planner chose (costing it needs the tokenizer).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import cast

from phaseaware.assembly.evidence.keys import question_terms
from phaseaware.assembly.inputs.chunks import Chunk, MergedDuplicate, normalize_merged
from phaseaware.assembly.inputs.options import MAX_PERIOD, AssemblyOptions, check_budget
from phaseaware.assembly.inputs.untrusted import clean_inputs
from phaseaware.assembly.plan.end_pad import end_pad_reach
from phaseaware.assembly.plan.initial import RepeatOffer
from phaseaware.assembly.plan.padding import PadTable, PadTables
from phaseaware.assembly.plan.planner import PlanInput, PlanStart
from phaseaware.assembly.plan.robust import primary_offset
from phaseaware.assembly.prepare.filler import (
    Filler,
    chunk_pad_tables,
    find_filler,
    measure_end_pad,
)
from phaseaware.assembly.prepare.measure import MeasuredChunk, drop_oversize, measure_chunks
from phaseaware.assembly.prepare.render import CHUNK_SEPARATOR, RepeatBlock, repeat_block
from phaseaware.assembly.retokenize.windowed import ChunkTokenCache
from phaseaware.caches import BoundedCache
from phaseaware.chat.append import DeltaLayout, TailLayout
from phaseaware.chat.formats import ChatFormat, chat_format_names, get_chat_format
from phaseaware.chat.layout import ConversationLayout, PromptLayout, conversation_layout
from phaseaware.errors import BudgetError, InputError
from phaseaware.profiles.model import Profile
from phaseaware.profiles.registry import check_period, check_tokenizer
from phaseaware.tokenizers.base import Tokenizer, implements
from phaseaware.tokenizers.control import ControlScanner, Neutralized
from phaseaware.tokenizers.short_encodes import encode_short

__all__ = ["MAX_PERIOD", "Frame", "Setup", "prepare", "repeat_offer"]

# MAX_PERIOD (phaseaware.limits): the largest profile period assembly accepts. Qualifying the
# filler for period P tokenizes pads of up to 2P units in real contexts: O(P^2)
# characters, once per (tokenizer, period), then cached in memory; planning is
# linear in P. Measured (benchmarks/assembly.py, o200k): first call about 1 s at
# P = 500, then ~10 ms; KV-compression periods seen in practice are 4-128.


@dataclass(frozen=True)
class Frame:
    """The layout around the context: the prompt is ``prefix + context + suffix``."""

    prefix: str
    suffix: str
    prefix_tokens: int
    suffix_tokens: int
    separator_tokens: int  # tokens of one ``CHUNK_SEPARATOR``


@dataclass(frozen=True)
class Setup:
    """Everything planning needs about one ``assemble`` call, measured once."""

    tokenizer: Tokenizer
    layout: PromptLayout
    system: str | None
    question: str
    profile: Profile | None
    options: AssemblyOptions
    budget: int  # budget_tokens
    frame: Frame
    chunks: tuple[MeasuredChunk, ...]  # input order
    filler: Filler | None  # None: padding off or no profile
    request: PlanInput  # what the planner reads: the numbers above, measured
    neutralized: tuple[Neutralized, ...] = ()  # control strings broken in user strings
    scanner: ControlScanner | None = None
    tokenizer_mismatch_allowed: bool = False  # the profile's fingerprint differs; opted in
    cache: ChunkTokenCache | None = (
        None  # chunk tokens (``retokenize.cache``); None: encode in full
    )
    # chunks dropped unread, before tokenizing: their length alone proves them over budget
    oversize: Mapping[int, str] = field(default_factory=dict)
    merged: tuple[MergedDuplicate, ...] = ()  # copies under one id, merged (input indices)


def prepare(
    chunks: Sequence[Chunk | str],
    *,
    tokenizer: Tokenizer,
    chat_format: str | ChatFormat | PromptLayout,
    question: str,
    system: str | None,
    profile: Profile | None,
    budget: int,
    options: AssemblyOptions,
    cache: ChunkTokenCache | None = None,
) -> Setup:
    """The checked, measured ``Setup`` of an ``assemble`` call (raises what ``assemble`` does).

    A chat format (name or ``ChatFormat``) becomes the single-turn conversation
    ``[system?, user(context + "\\n\\n" + question)]`` built for this call, after
    the system prompt is cleaned with the other user strings; a layout is used as is.
    With ``options.offsets`` the chunks are planned for the smallest offset
    (``options.position_offset`` becomes it).
    """
    check_budget(budget)
    if options.offsets:  # offset-robust: plan for the smallest offset, copies cover the rest
        options = replace(options, position_offset=primary_offset(options.offsets))
    given = _format_or_layout(chat_format, tokenizer)
    merged = normalize_merged(chunks, duplicate_ids=options.duplicate_ids)
    normalized, question, system, neutralized, scanner = clean_inputs(
        merged.chunks, question=question, system=system, tokenizer=tokenizer,
        layout=given.name, policy=options.control_tokens,
    )  # fmt: skip
    if implements(given, PromptLayout):  # a protocol check, remembered per object
        layout = cast(PromptLayout, given)
    else:  # the single-turn call: a conversation built for it (its system already clean)
        layout = _single_turn(tokenizer, cast(ChatFormat, given), system, options.control_tokens)
        system = None
    if isinstance(layout, ConversationLayout | DeltaLayout | TailLayout):  # message text
        neutralized = layout.neutralized_for(question) + neutralized
    if profile is not None and profile.period > MAX_PERIOD:
        raise InputError(
            f"profile {profile.model!r} has period {profile.period}; assembly supports "
            f"periods up to {MAX_PERIOD} (phaseaware.limits.MAX_PERIOD); re-calibrate with a shorter "
            "period or assemble without the profile"
        )
    mismatch_allowed = False
    if profile is not None:
        matched = check_tokenizer(
            profile, tokenizer, allow_mismatch=options.allow_tokenizer_mismatch
        )
        mismatch_allowed = not matched and profile.tokenizer.fingerprint is not None
        if options.period is not None:
            check_period(profile, options.period)
    prefix, suffix = layout.split(system=system, question=question)
    n_prefix = len(encode_short(tokenizer, prefix))
    n_suffix = len(encode_short(tokenizer, suffix))
    if n_prefix + n_suffix > budget:
        raise BudgetError(
            f"budget_tokens={budget} cannot hold the template, system prompt and question "
            f"({n_prefix + n_suffix} tokens); raise budget_tokens to at least "
            f"{n_prefix + n_suffix + 1} or shorten the question"
        )
    normalized, oversize = drop_oversize(normalized, tokenizer=tokenizer, budget=budget)
    prepared = measure_chunks(
        normalized,
        tokenizer=tokenizer,
        terms=question_terms(question),
        max_keys=options.max_keys_per_chunk,
        cache=cache,
    )
    filler, end_table = _filler(tokenizer, profile, options, suffix)
    frame = Frame(
        prefix=prefix,
        suffix=suffix,
        prefix_tokens=n_prefix,
        suffix_tokens=n_suffix,
        separator_tokens=len(encode_short(tokenizer, CHUNK_SEPARATOR)),
    )
    kept = filler if options.pad or end_table else None
    effect = profile.length_residue_accuracy if profile is not None else None
    request = PlanInput(
        scores=tuple(p.chunk.score for p in prepared),
        sizes=tuple(p.tokens for p in prepared),
        empty=tuple(p.empty for p in prepared),
        key_offsets=tuple(p.key_tokens for p in prepared),
        prefix_tokens=n_prefix,
        suffix_tokens=n_suffix,
        separator_tokens=frame.separator_tokens,
        budget=budget,
        tables=PadTables(
            chunks=chunk_pad_tables(tokenizer, filler if options.pad else None, prepared),
            end=end_table,
        ),
        profile=profile,
        strategy=options.strategy,
        pad=kept is not None and options.pad,
        pad_cost=options.pad_cost,
        repeat=options.repeat,
        length_pad=options.length_pad,
        length_period=effect.period if effect is not None else None,
        offset=options.position_offset,
        offsets=options.offsets,
    )
    return Setup(
        tokenizer=tokenizer, layout=layout, system=system, question=question, profile=profile,
        options=options, budget=budget, frame=frame, chunks=prepared, filler=kept,
        request=request, neutralized=neutralized, scanner=scanner,
        tokenizer_mismatch_allowed=mismatch_allowed, cache=cache, oversize=oversize,
        merged=merged.merged,
    )  # fmt: skip


# the single-turn layouts by (tokenizer, chat format, system, policy): built once, their split
# memo then serves every later call (each entry holds its tokenizer and format, so their ids
# are not reused meanwhile)
_LAYOUTS: BoundedCache[
    tuple[int, int, str | None, str], tuple[Tokenizer, ChatFormat, ConversationLayout]
] = BoundedCache(max_entries=64, name="assembly.single_turn_layouts")


def _single_turn(
    tokenizer: Tokenizer, chat_format: ChatFormat, system: str | None, control_tokens: str
) -> ConversationLayout:
    """``conversation_layout`` of ``[system?, user(context + "\\n\\n" + question)]``, kept."""
    key = (id(tokenizer), id(chat_format), system, control_tokens)
    known = _LAYOUTS.get(key)
    if known is not None and known[0] is tokenizer and known[1] is chat_format:
        return known[2]
    layout = conversation_layout(
        tokenizer=tokenizer, chat_format=chat_format, system=system, control_tokens=control_tokens
    )
    _LAYOUTS.put(key, (tokenizer, chat_format, layout))
    return layout


def _format_or_layout(
    chat_format: str | ChatFormat | PromptLayout, tokenizer: Tokenizer
) -> ChatFormat | PromptLayout:
    if isinstance(chat_format, str):
        return get_chat_format(chat_format, tokenizer)
    if implements(chat_format, PromptLayout) or implements(chat_format, ChatFormat):
        return chat_format
    raise InputError(
        f"chat_format must be a chat format name ({', '.join(chat_format_names())}), a "
        f"ChatFormat or a layout (conversation_layout), got {type(chat_format).__name__}"
    )


def _filler(
    tokenizer: Tokenizer, profile: Profile | None, options: AssemblyOptions, suffix: str
) -> tuple[Filler | None, PadTable | None]:
    """(the filler unit, the end pad's table): None where the options or profile need none."""
    if profile is None or not (options.pad or options.length_pad):
        return None, None
    filler = find_filler(tokenizer, period=profile.period)
    effect = profile.length_residue_accuracy
    max_k = end_pad_reach(
        period=profile.period,
        window=profile.local_window,
        window_reliability=profile.window_reliability(),
        best_reliability=profile.best_reliability(),
        length_period=effect.period if effect is not None else None,
        pad=options.pad,
        length_pad=options.length_pad,
    )
    if not max_k:
        return filler, None
    end_table = measure_end_pad(
        tokenizer,
        unit=filler.unit,
        period=profile.period,
        context_tail="the end.",
        suffix=suffix,
        max_k=max_k,
    )
    return filler, end_table


def repeat_offer(setup: Setup, planned: PlanStart) -> tuple[RepeatBlock | None, RepeatOffer | None]:
    """The block restating the planned top evidence, where it is repeated or copied
    (``options.offsets``), and the repeat's offer: the block's measured cost in tokens,
    separator included (None: not offered; the planner decides whether it pays)."""
    chunk = planned.evidence
    if chunk is None or (planned.repeat is None and not setup.options.offsets):
        return None, None
    prep, options = setup.chunks[chunk], setup.options
    block = repeat_block(
        prep.chunk.text, prep.key_chars, label=options.repeat_label,
        max_chars=options.repeat_max_chars,
    )  # fmt: skip
    if planned.repeat is None:  # copied only: its cost is measured with the copies
        return block, None
    cost = setup.frame.separator_tokens + len(encode_short(setup.tokenizer, block.text))
    window = setup.profile.local_window if setup.profile is not None else None
    return block, RepeatOffer(chunk=chunk, cost=cost, window=window)
