"""Token-exact, phase-aware assembly of retrieved chunks into one prompt.

``assemble`` orchestrates; it decides nothing itself. Each stage takes the previous
stage's value and is called once:

1. ``prepare``: check the arguments, split the layout around the context, measure
   all chunks in context (one tokenizer call) and qualify the filler; its
   ``request`` is what the planner reads (numbers and flags only);
2. ``planner.start_plan``: relevance weights, admission, the top evidence, the
   repeat candidate and the naive baseline; ``repeat_offer`` then measures the
   evidence's block (costing the repeat needs the tokenizer);
3. ``verify``: plan (``planner.initial``: order, repeat, order search, pads),
   render, tokenize the prompt once per round and re-plan from the *measured*
   positions (``planner.replan``) until the plan is a fixed point; when boundary
   merges make the confirmed prompt longer than the budget, the least relevant
   admitted chunk is dropped and the plan redone. ``verify.final`` then renders
   the final prompt once and scans it; with ``options.offsets`` it first plans the
   offset-robust copies of the evidence on the filler's pad table and confirms
   them by re-tokenizing;
4. ``report.build_result``: the measured positions, residues and token counts
   (per offset, by ``report.robust``, with the copies).

Invariants: every admitted chunk text appears verbatim once (plus the declared
repeat); ``token_count <= budget_tokens``; same input → byte-identical output;
caller objects are never mutated.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from phaseaware.assembly.inputs.chunks import Chunk
from phaseaware.assembly.inputs.options import AssemblyOptions
from phaseaware.assembly.plan import planner
from phaseaware.assembly.prepare.measured_request import prepare, repeat_offer
from phaseaware.assembly.report.build import build_result
from phaseaware.assembly.report.result import AssemblyResult
from phaseaware.assembly.retokenize.windowed import ChunkTokenCache, TokenStarts, default_cache
from phaseaware.assembly.verify.final import confirm_prompt
from phaseaware.assembly.verify.fixed_point import verify
from phaseaware.chat.formats import ChatFormat, get_chat_format
from phaseaware.chat.layout import PromptLayout, conversation_layout
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
) -> AssemblyResult:
    """Assemble ``chunks`` into a prompt of at most ``budget_tokens`` tokens.

    ``chat_format``: how the prompt is written around the context: a format name
    (``none``, ``chatml``, ``hf``, ``deepseek-v4``: the single-turn conversation
    ``[system?, user(context + "\\n\\n" + question)]``), a ``ChatFormat``
    (``phaseaware.chat.get_chat_format``, e.g. with ``thinking=True``), or a layout
    built from one (``conversation_layout``, ``append_layout``; its system prompt
    is in its messages).

    ``cache``: chunk tokenizations reused across calls (``retokenize.cache.ChunkTokenCache``,
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
    ``None`` with ``options.offsets`` (the offset-robust copies are added after the
    fixed point, and the prompt with them is tokenized apart). Append alignment
    keeps them to re-use the sent prefix on the next call.
    """
    options = options if options is not None else AssemblyOptions()
    setup = prepare(
        chunks, tokenizer=tokenizer, chat_format=chat_format, question=question,
        system=system, profile=profile, budget=budget_tokens, options=options, cache=cache,
    )  # fmt: skip
    planned = planner.start_plan(setup.request)
    block, offer = repeat_offer(setup, planned)
    fixed = verify(setup, planned, offer, block)
    confirmed = confirm_prompt(setup, planned, fixed, block)
    result = build_result(setup, planned, confirmed)
    return result, confirmed.measured if confirmed.copies is None else None


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
    settings: ChatSettings | None = None,
) -> AssemblyResult:
    """``assemble`` with a tokenizer spec, chat format name and profile name/path accepted.

    ``thinking`` selects the thinking variant of a named chat format (``deepseek-v4``,
    ``hf``). ``messages`` (one ``{context}`` slot, ``{question}`` placeholders)
    replaces ``system``: the conversation is rendered by ``chat_format``.
    ``settings``: the full chat settings (reasoning effort, ...; e.g. an endpoint
    record's ``server_default``) for a chat format name; they replace ``thinking``.
    """
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
