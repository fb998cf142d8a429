"""Token-exact, phase-aware assembly of retrieved chunks into one prompt.

``assemble`` orchestrates; it decides nothing itself:

1. ``setup.prepare``: check the arguments, split the layout around the context,
   measure all chunks in context (one tokenizer call) and qualify the filler;
2. ``plan``: admit (``planner.admit``), then order, repeat, order search, pads and
   end pad (``plan.initial.initial_plan``), from token counts and the profile's
   reliabilities; this module only measures what the planner is handed (the repeat
   block's tokens);
3. ``verify``: render (``render``), tokenize the final prompt once, re-plan from
   the *measured* positions until the plan is a fixed point (repairing
   boundary merges);
4. ``result.build_result``: report the measured positions, residues and token
   counts.

When boundary merges make the verified prompt longer than the budget, the
least relevant admitted chunk is dropped and the plan redone.

Invariants: every admitted chunk text appears verbatim once (plus the declared
repeat); ``token_count <= budget_tokens``; same input → byte-identical output;
caller objects are never mutated.
"""

from __future__ import annotations

import dataclasses
import warnings
from collections.abc import Mapping, Sequence
from typing import Any

from phaseaware.assembly import robust
from phaseaware.assembly.inputs.chunks import Chunk
from phaseaware.assembly.inputs.options import AssemblyOptions
from phaseaware.assembly.inputs.untrusted import confirm
from phaseaware.assembly.plan import planner
from phaseaware.assembly.plan.initial import OrderSearch, RepeatOffer, initial_plan
from phaseaware.assembly.plan.planner import PadTables, Plan
from phaseaware.assembly.prepare.measured_request import Setup, end_reserve, plan_pads, prepare
from phaseaware.assembly.prepare.render import RepeatBlock, render_prompt, repeat_block
from phaseaware.assembly.report.build import build_result
from phaseaware.assembly.report.prefix import without_context_tokens
from phaseaware.assembly.report.result import AssemblyResult
from phaseaware.assembly.retokenize.windowed import (
    ChunkTokenCache,
    TokenStarts,
    default_cache,
    full_starts,
)
from phaseaware.assembly.verify.fixed_point import Verified, verify
from phaseaware.chat.formats import ChatFormat, get_chat_format
from phaseaware.chat.layout import PromptLayout, conversation_layout, single_turn_format
from phaseaware.chat.messages import Message
from phaseaware.chat.settings import ChatSettings
from phaseaware.errors import InputError
from phaseaware.profiles.model import Profile
from phaseaware.profiles.registry import get_profile
from phaseaware.tokenizers import load_tokenizer
from phaseaware.tokenizers.base import Tokenizer

__all__ = ["assemble", "assemble_measured", "assemble_from_specs"]

_DEFAULT_CACHE = default_cache()


def assemble(
    chunks: Sequence[Chunk | str],
    *,
    tokenizer: str | Tokenizer,
    chat_format: str | ChatFormat | PromptLayout = "none",
    question: str,
    system: str | None = None,
    profile: str | Profile | None = None,
    budget_tokens: int,
    options: AssemblyOptions | None = None,
    cache: ChunkTokenCache | None = _DEFAULT_CACHE,
    layout: PromptLayout | None = None,
) -> AssemblyResult:
    """Assemble ``chunks`` into a prompt of at most ``budget_tokens`` tokens.

    ``chat_format``: how the prompt is written around the context: a format name
    (``none``, ``chatml``, ``hf``, ``deepseek-v4``: the single-turn conversation
    ``[system?, user(context + "\\n\\n" + question)]``), a ``ChatFormat``
    (``phaseaware.chat.get_chat_format``, e.g. with ``thinking=True``), or a layout
    built from one (``conversation_layout``, ``append_layout``; its system prompt
    is in its messages). ``layout=`` is the deprecated name of this parameter.

    ``cache``: chunk tokenizations reused across calls (``stitch.ChunkTokenCache``,
    LRU, capped in bytes; the process-wide 64 MiB one by default, ``None``: no
    cache, every prompt encoded in full). Caching never changes the result.

    ``tokenizer`` and ``profile`` take the same specs as :func:`assemble_conversation`:
    a tokenizer spec (``"deepseek-v4"``, ``"tiktoken:o200k_base"``, ...) and a profile
    name or path; or the objects.

    Raises ``InputError`` (empty chunk list, bad evidence, bad options),
    ``BudgetError`` (budget below the template + question),
    ``FingerprintMismatchError``/``PeriodMismatchError`` (profile vs tokenizer
    or ``options.period``) and ``VerificationError`` (placement not confirmed).
    """
    if layout is not None:
        chat_format = _deprecated_layout(layout, chat_format)
    return assemble_measured(
        chunks,
        tokenizer=load_tokenizer(tokenizer) if isinstance(tokenizer, str) else tokenizer,
        chat_format=chat_format, question=question, system=system,
        profile=get_profile(profile) if isinstance(profile, str) else profile,
        budget_tokens=budget_tokens, options=options, cache=cache,
    )[0]  # fmt: skip


def assemble_measured(
    chunks: Sequence[Chunk | str],
    *,
    tokenizer: Tokenizer,
    chat_format: str | ChatFormat | PromptLayout,
    question: str,
    system: str | None = None,
    profile: Profile | None = None,
    budget_tokens: int,
    options: AssemblyOptions | None = None,
    cache: ChunkTokenCache | None = _DEFAULT_CACHE,
) -> tuple[AssemblyResult, TokenStarts | None]:
    """``assemble``, plus the token starts of ``result.prompt`` that confirmed it.

    The starts are the verified tokenization (stitched or one encode, exact);
    ``None`` where the result's prompt was rewritten after verification
    (``options.offsets``: the robust copies). Append alignment keeps them to
    re-use the sent prefix on the next call.
    """
    options = options if options is not None else AssemblyOptions()
    if options.offsets:  # offset-robust: plan for the smallest offset, copies cover the rest
        options = dataclasses.replace(
            options, position_offset=robust.primary_offset(options.offsets)
        )
    setup = prepare(
        chunks, tokenizer=tokenizer, chat_format=chat_format, question=question,
        system=system, profile=profile, budget=budget_tokens, options=options, cache=cache,
    )  # fmt: skip
    frame, tables = setup.frame, setup.tables
    fixed = frame.prefix_tokens + frame.suffix_tokens
    admission = planner.admit(
        scores=[p.chunk.score for p in setup.chunks],
        costs=[p.tokens for p in setup.chunks],
        empty=[p.empty for p in setup.chunks],
        budget_left=max(0, setup.budget - fixed - end_reserve(setup, tables)),
    )
    dropped = {**dict(admission.dropped), **setup.oversize}  # oversize: emptied, unread
    admitted = list(admission.admitted)
    while admitted:
        plan, repeat = _initial_plan(setup, tables, admitted)
        verified = verify(setup, tables, plan, repeat)
        if len(verified.measured) <= setup.budget:
            return _finish(setup, verified, dropped)
        tables = verified.tables  # pads frozen by verification stay frozen
        # Boundary merges made the prompt longer than estimated: drop the least relevant.
        dropped[admitted.pop()] = (
            f"over budget: the prompt measured {len(verified.measured)} tokens with it, "
            f"budget is {setup.budget}"
        )
    return _finish(setup, None, dropped)


def _deprecated_layout(
    layout: str | PromptLayout, chat_format: str | ChatFormat | PromptLayout
) -> str | ChatFormat | PromptLayout:
    """``chat_format`` for the deprecated ``layout=`` keyword (a one-line warning)."""
    warnings.warn(
        "the layout= keyword is deprecated; use chat_format= (a name, a ChatFormat or a layout)",
        DeprecationWarning,
        stacklevel=3,
    )
    if not (isinstance(chat_format, str) and chat_format == "none"):
        raise InputError("pass chat_format= only (layout= is its deprecated name)")
    # get_layout(name) was the single-turn layout taking system= per call: keep that
    return single_turn_format(layout) or layout


def _initial_plan(
    setup: Setup, tables: PadTables, admitted: Sequence[int]
) -> tuple[Plan, RepeatBlock | None]:
    """The planner's initial plan (``plan.initial``), fed the setup's numbers; the repeat
    block is measured here, before planning, because costing it needs the tokenizer."""
    options, profile, frame = setup.options, setup.profile, setup.frame
    block, offer = _repeat_offer(setup, admitted)
    search = None
    searchable = options.strategy == "reorder" and options.pad and setup.filler is not None
    if searchable and profile is not None:
        search = OrderSearch(
            start=frame.prefix_tokens + options.position_offset,
            residue_reliability=_residue_reliability(profile, options),
            pad_tables=tables.chunks,
            pad_cost=options.pad_cost,
        )

    def pads(
        order: Sequence[int], keys: Sequence[Sequence[int]], length: int, slack: int
    ) -> tuple[tuple[int, ...], int]:
        return plan_pads(setup, tables, order, keys, length=length, slack=slack)

    plan = initial_plan(
        admitted=admitted,
        scores=[p.chunk.score for p in setup.chunks],
        sizes=[p.tokens for p in setup.chunks],
        key_offsets=[p.key_tokens for p in setup.chunks],
        weights=setup.weights,
        strategy=options.strategy,
        has_profile=profile is not None,
        prefix_tokens=frame.prefix_tokens,
        suffix_tokens=frame.suffix_tokens,
        separator_tokens=frame.separator_tokens,
        budget=setup.budget,
        reserve=end_reserve(setup, tables),
        repeat=offer,
        search=search,
        pads=pads,
    )
    return plan, block if plan.repeat is not None else None


def _residue_reliability(profile: Profile, options: AssemblyOptions) -> list[float]:
    values = [profile.residue_reliability(r) for r in range(profile.period)]
    if not options.offsets:
        return values
    return robust.mean_residue_reliability(
        values, offsets=options.offsets, primary=options.position_offset
    )


def _repeat_offer(
    setup: Setup, admitted: Sequence[int]
) -> tuple[RepeatBlock | None, RepeatOffer | None]:
    """The repeat candidate's block and its measured cost (the planner decides)."""
    options, profile = setup.options, setup.profile
    if not options.repeat:
        return None, None
    top = planner.repeat_candidate(
        order=admitted,
        scores=[p.chunk.score for p in setup.chunks],
        has_keys=[bool(p.key_chars) for p in setup.chunks],
    )
    if top is None:
        return None, None
    prep = setup.chunks[top]
    block = repeat_block(
        prep.chunk.text,
        prep.key_chars,
        label=options.repeat_label,
        max_chars=options.repeat_max_chars,
    )
    cost = setup.frame.separator_tokens + len(setup.tokenizer.encode(block.text))
    window = profile.local_window if profile is not None else None
    return block, RepeatOffer(chunk=top, cost=cost, window=window)


def _finish(
    setup: Setup, verified: Verified | None, dropped: dict[int, str]
) -> tuple[AssemblyResult, TokenStarts | None]:
    result, measured = _build(setup, verified, dropped)
    if setup.options.offsets:  # copies rewrite the context: the shared prefix is re-measured
        copied = robust.add_copies(setup, result)
        kept = without_context_tokens(setup, copied.prompt, starts=None)
        return dataclasses.replace(copied, unchanged_prefix_tokens=kept), None
    return result, measured


def _build(
    setup: Setup, verified: Verified | None, dropped: dict[int, str]
) -> tuple[AssemblyResult, TokenStarts]:
    if verified is None:
        prompt = setup.layout.render(system=setup.system, context="", question=setup.question)
        measured = full_starts(setup.tokenizer, prompt.text)
        _confirm(setup, prompt.text)
        result = build_result(
            setup, plan=None, rendered=None, measured=measured, prompt=prompt, dropped=dropped
        )
        return result, measured
    prompt = render_prompt(
        setup.layout,
        system=setup.system,
        question=setup.question,
        context=verified.rendered.text,
        prefix=setup.frame.prefix,
        suffix=setup.frame.suffix,
    )
    _confirm(setup, prompt.text)
    result = build_result(
        setup,
        plan=verified.plan,
        rendered=verified.rendered,
        measured=verified.measured,
        prompt=prompt,
        dropped=dropped,
    )
    return result, verified.measured


def _confirm(setup: Setup, prompt: str) -> None:
    """No control string in the final prompt beyond its template's (scanned, not assumed)."""
    if setup.scanner is not None:
        confirm(setup.scanner, frame=setup.frame.prefix + setup.frame.suffix, prompt=prompt)


def assemble_from_specs(
    chunks: Sequence[Chunk | str],
    *,
    tokenizer: str | Tokenizer,
    chat_format: str | ChatFormat | PromptLayout = "none",
    question: str,
    system: str | None = None,
    profile: str | Profile | None = None,
    budget_tokens: int,
    options: AssemblyOptions | None = None,
    thinking: bool = False,
    messages: Sequence[Mapping[str, Any] | Message] | None = None,
    cache: ChunkTokenCache | None = _DEFAULT_CACHE,
    layout: str | PromptLayout | None = None,
    settings: ChatSettings | None = None,
) -> AssemblyResult:
    """``assemble`` with a tokenizer spec, chat format name and profile name/path accepted.

    ``thinking`` selects the thinking variant of a named chat format (``deepseek-v4``,
    ``hf``). ``messages`` (one ``{context}`` slot, ``{question}`` placeholders)
    replaces ``system``: the conversation is rendered by ``chat_format``.
    ``layout=`` is the deprecated name of ``chat_format``.
    ``settings``: the full chat settings (reasoning effort, ...; e.g. an endpoint
    record's ``server_default``) for a chat format name; they replace ``thinking``.
    """
    if layout is not None:
        chat_format = _deprecated_layout(layout, chat_format)
    tok = load_tokenizer(tokenizer) if isinstance(tokenizer, str) else tokenizer
    if settings is not None:
        if not isinstance(settings, ChatSettings):
            raise InputError(f"settings must be a ChatSettings, got {type(settings).__name__}")
        if thinking and not settings.thinking:
            raise InputError("thinking=True disagrees with settings; pass thinking in settings")
        if not isinstance(chat_format, str):
            raise InputError("with settings, chat_format must name a chat format")
        thinking = settings.thinking
        if settings.given() <= {"thinking"}:
            settings = None  # thinking alone: the path it always took
    fmt: ChatFormat | PromptLayout
    if not isinstance(chat_format, str):
        fmt = chat_format
    elif settings is not None:
        fmt = get_chat_format(chat_format, tok, settings=settings)
    else:
        fmt = get_chat_format(chat_format, tok, thinking=thinking)
    if messages is not None:
        if isinstance(fmt, PromptLayout):
            raise InputError(
                "with messages, chat_format must be a chat format (a name such as 'chatml' "
                "or a ChatFormat), not a layout"
            )
        fmt = conversation_layout(
            tokenizer=tok, chat_format=fmt, messages=messages, system=system,
            question=question,
        )  # fmt: skip
        system = None
    prof = get_profile(profile) if isinstance(profile, str) else profile
    return assemble(
        chunks,
        tokenizer=tok,
        chat_format=fmt,
        question=question,
        system=system,
        profile=prof,
        budget_tokens=budget_tokens,
        options=options,
        cache=cache,
    )
