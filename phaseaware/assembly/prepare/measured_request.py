"""A request checked and measured in context: the immutable input of planning.

``prepare`` validates the caller's arguments, builds the layout (a chat format's
single-turn conversation, or the caller's layout), splits it around the context, measures every chunk in context and qualifies the filler. The
resulting ``Setup`` never changes; verification works on its own copy of the
pad tables (``PadTables``). ``end_reserve`` and ``plan_pads`` feed a setup's
numbers to the planner.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field, replace

from phaseaware.assembly.evidence.keys import question_terms
from phaseaware.assembly.inputs.chunks import Chunk, normalize_chunks
from phaseaware.assembly.inputs.options import MAX_PERIOD, AssemblyOptions, check_budget
from phaseaware.assembly.inputs.untrusted import clean_inputs
from phaseaware.assembly.plan import planner
from phaseaware.assembly.plan.planner import PadTable, PadTables
from phaseaware.assembly.prepare.filler import (
    Filler,
    chunk_pad_tables,
    find_filler,
    measure_end_pad,
)
from phaseaware.assembly.prepare.measure import MeasuredChunk, measure_chunks
from phaseaware.assembly.prepare.render import CHUNK_SEPARATOR
from phaseaware.assembly.retokenize.windowed import ChunkTokenCache
from phaseaware.chat.append import DeltaLayout, TailLayout
from phaseaware.chat.formats import ChatFormat, chat_format_names, get_chat_format
from phaseaware.chat.layout import ConversationLayout, PromptLayout, conversation_layout
from phaseaware.errors import BudgetError, InputError
from phaseaware.profiles.model import Profile
from phaseaware.profiles.registry import check_period, check_tokenizer
from phaseaware.tokenizers.base import Tokenizer
from phaseaware.tokenizers.bound import max_token_bytes, min_tokens
from phaseaware.tokenizers.control import ControlScanner, Neutralized

__all__ = ["MAX_PERIOD", "Frame", "Setup", "prepare", "end_reserve", "plan_pads"]

# MAX_PERIOD (options.py): the largest profile period assembly accepts. Qualifying the
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
    weights: tuple[float, ...]  # relevance weights, input order
    filler: Filler | None  # None: padding off or no profile
    tables: PadTables  # before verification froze any pad
    neutralized: tuple[Neutralized, ...] = ()  # control strings broken in user strings
    scanner: ControlScanner | None = None
    tokenizer_mismatch_allowed: bool = False  # the profile's fingerprint differs; opted in
    cache: ChunkTokenCache | None = None  # chunk tokens (``stitch``); None: encode in full
    # chunks dropped unread, before tokenizing: their length alone proves them over budget
    oversize: Mapping[int, str] = field(default_factory=dict)


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
    """
    check_budget(budget)
    given = _format_or_layout(chat_format, tokenizer)
    normalized, question, system, neutralized, scanner = clean_inputs(
        normalize_chunks(chunks), question=question, system=system, tokenizer=tokenizer,
        layout=given.name, policy=options.control_tokens,
    )  # fmt: skip
    if isinstance(given, PromptLayout):
        layout = given
    else:  # the single-turn call: a conversation built for it (its system already clean)
        layout = conversation_layout(
            tokenizer=tokenizer, chat_format=given, system=system,
            control_tokens=options.control_tokens,
        )  # fmt: skip
        system = None
    if isinstance(layout, ConversationLayout | DeltaLayout | TailLayout):  # message text
        neutralized = layout.neutralized_for(question) + neutralized
    if profile is not None and profile.period > MAX_PERIOD:
        raise InputError(
            f"profile {profile.model!r} has period {profile.period}; assembly supports "
            f"periods up to {MAX_PERIOD} (setup.MAX_PERIOD); re-calibrate with a shorter "
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
    n_prefix, n_suffix = len(tokenizer.encode(prefix)), len(tokenizer.encode(suffix))
    if n_prefix + n_suffix > budget:
        raise BudgetError(
            f"budget_tokens={budget} cannot hold the template, system prompt and question "
            f"({n_prefix + n_suffix} tokens); raise budget_tokens to at least "
            f"{n_prefix + n_suffix + 1} or shorten the question"
        )
    normalized, oversize = _drop_oversize(normalized, tokenizer=tokenizer, budget=budget)
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
        separator_tokens=len(tokenizer.encode(CHUNK_SEPARATOR)),
    )
    return Setup(
        tokenizer=tokenizer, layout=layout, system=system, question=question, profile=profile,
        options=options, budget=budget, frame=frame, chunks=prepared,
        weights=planner.relevance_weights([c.score for c in normalized]),
        filler=filler if options.pad or end_table else None,
        tables=PadTables(
            chunks=chunk_pad_tables(tokenizer, filler if options.pad else None, prepared),
            end=end_table,
        ),
        neutralized=neutralized, scanner=scanner, tokenizer_mismatch_allowed=mismatch_allowed,
        cache=cache, oversize=oversize,
    )  # fmt: skip


def _format_or_layout(
    chat_format: str | ChatFormat | PromptLayout, tokenizer: Tokenizer
) -> ChatFormat | PromptLayout:
    if isinstance(chat_format, str):
        return get_chat_format(chat_format, tokenizer)
    if isinstance(chat_format, PromptLayout | ChatFormat):
        return chat_format
    raise InputError(
        f"chat_format must be a chat format name ({', '.join(chat_format_names())}), a "
        f"ChatFormat or a layout (conversation_layout), got {type(chat_format).__name__}"
    )


def _drop_oversize(
    chunks: Sequence[Chunk], *, tokenizer: Tokenizer, budget: int
) -> tuple[tuple[Chunk, ...], dict[int, str]]:
    """Chunks whose length alone proves them over the whole budget, emptied before any
    tokenizer sees them (a 100 MB document must not reach a tokenizer that would allocate
    gigabytes), with the reason each is dropped; the others unchanged. The bound is
    ``tokenizers.bound``'s (sound only where it returns one; otherwise nothing is dropped
    here and the chunk is measured as before)."""
    k = max_token_bytes(tokenizer)
    if k is None or all(len(c.text) <= budget for c in chunks):  # cannot exceed: fast path
        return tuple(chunks), {}
    out: list[Chunk] = []
    dropped: dict[int, str] = {}
    for i, chunk in enumerate(chunks):
        least = min_tokens(len(chunk.text), k)
        if least > budget:
            dropped[i] = (
                f"over budget: its {len(chunk.text)} characters are at least {least} tokens "
                f"(no token of {tokenizer.spec} spans over {k} bytes), budget is {budget}; "
                "not tokenized"
            )
            out.append(replace(chunk, text="", evidence=()))
        else:
            out.append(chunk)
    return tuple(out), dropped


def _filler(
    tokenizer: Tokenizer, profile: Profile | None, options: AssemblyOptions, suffix: str
) -> tuple[Filler | None, PadTable | None]:
    """(the filler unit, the end pad's table): None where the options or profile need none."""
    if profile is None or not (options.pad or options.length_pad):
        return None, None
    filler = find_filler(tokenizer, period=profile.period)
    effect = profile.length_residue_accuracy
    max_k = planner.end_pad_reach(
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


def end_reserve(setup: Setup, tables: PadTables) -> int:
    """Tokens kept free for the end pad of a length-residue correction."""
    effect = setup.profile.length_residue_accuracy if setup.profile is not None else None
    return planner.end_reserve(
        end_shifts=tables.end.shifts if tables.end is not None else None,
        length_period=effect.period if effect is not None else None,
        length_pad=setup.options.length_pad,
    )


def plan_pads(
    setup: Setup,
    tables: PadTables,
    order: Sequence[int],
    base_keys: Sequence[Sequence[int]],
    *,
    length: int,
    slack: int,
) -> tuple[tuple[int, ...], int]:
    """(pads per ordered chunk, end pad) for unpadded key positions ``base_keys``.

    ``length``: the unpadded prompt's tokens; ``slack``: budget left beyond it
    and the end reserve. No profile: no padding.
    """
    profile = setup.profile
    if profile is None:
        return tuple(0 for _ in order), 0
    offset = setup.options.position_offset

    def length_factor(prompt_tokens: int) -> float:
        return profile.length_factor(prompt_tokens + offset)

    return planner.best_pads(
        key_positions=base_keys,
        weights=[setup.weights[i] for i in order],
        pad_tables=[tables.chunks[i] for i in order],
        end_shifts=tables.end.shifts if tables.end is not None else None,
        period=profile.period,
        window=profile.local_window,
        reliability=_key_reliability(profile, setup.options),
        length_factor=length_factor,
        pad=setup.filler is not None and setup.options.pad,
        pad_cost=setup.options.pad_cost,
        length=length,
        slack=max(0, slack) + end_reserve(setup, tables),
        residue_values=_residue_values(profile, setup.options),
    )


def _residue_values(profile: Profile, options: AssemblyOptions) -> list[float]:
    """``_key_reliability(t, d)`` by ``t``'s residue for keys outside the local window
    (with ``options.offsets``: the same mean over the set, in the same order)."""
    period = profile.period
    if not options.offsets:
        offset = options.position_offset
        return [profile.residue_reliability(r + offset) for r in range(period)]
    offsets = options.offsets
    return [
        sum(profile.residue_reliability(r + d) for d in offsets) / len(offsets)
        for r in range(period)
    ]


def _key_reliability(profile: Profile, options: AssemblyOptions) -> Callable[[int, int], float]:
    """The planner's key reliability; with ``options.offsets``, its mean over the set."""
    if not options.offsets:
        return planner.key_reliability(profile, offset=options.position_offset)
    lookups = [planner.key_reliability(profile, offset=d) for d in options.offsets]
    return lambda t, distance: sum(f(t, distance) for f in lookups) / len(lookups)
