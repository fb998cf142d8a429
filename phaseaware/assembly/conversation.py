"""Conversations and agent loops: exact, phase-aware placement inside any chat.

Three calls, all thin wrappers around :func:`phaseaware.assembly.assemble` (one
pipeline; the chat layouts of :mod:`phaseaware.chat` decide where the context
goes):

- :func:`assemble_conversation`: the caller's whole message list with one
  ``{context}`` slot (in any message, or a message of its own) and any number
  of ``{question}`` placeholders, rendered by a chat format (``deepseek-v4``,
  ``chatml``, ``hf``, ``none``).
- :func:`assemble_append`: agent loops. A conversation already sent (``sent``)
  plus ONE new message (``new``, e.g. a tool result ``"Result:\\n{context}"``):
  evidence is placed inside the new message only, by ordering and padding the
  chunks in it. Every byte already sent stays identical (checked on the final
  prompt: the server's prefix cache still hits). Positions are absolute in the
  whole conversation; ``result.messages`` is the full list, slot filled.
- :func:`assemble_append_after`: the cheap form, with the token count of the
  sent prefix (e.g. ``usage.prompt_tokens + usage.completion_tokens`` of the
  last call) instead of its text. Token positions and ``token_count`` are
  absolute (the delta's positions + ``prefix_tokens``); ``result.prompt`` is the
  appended text alone (char offsets index into it) and ``result.messages`` is
  the new message alone, slot filled, for the caller to append.

``budget_tokens`` always bounds the whole conversation (sent prefix included).

Append alignment plans, by default (``persistent=True``), for the residues the
new message's tokens will have on every LATER call: once the conversation grows
past it, the message leaves the model's raw local window and is read
compressed. The profile's local window is therefore left out of planning and of
the reported expected accuracies (``persistent=False``: plan for this call
only, window included). Without ``options``, append alignment does not restate
evidence (``repeat=False``): it only orders and pads inside the new message.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import replace
from typing import Any, TypeVar

from phaseaware.assembly.incremental import assemble_tail
from phaseaware.assembly.inputs.chunks import Chunk
from phaseaware.assembly.inputs.options import AssemblyOptions, check_budget
from phaseaware.assembly.pipeline import assemble
from phaseaware.assembly.report.result import AssemblyResult, Placement, RepeatPlacement
from phaseaware.assembly.retokenize.prefix import PrefixTokenCache, default_prefix_cache
from phaseaware.chat.append import append_from_count, append_layout
from phaseaware.chat.errors import PrefixRewriteError
from phaseaware.chat.formats import ChatFormat, get_chat_format
from phaseaware.chat.layout import conversation_layout
from phaseaware.chat.messages import Message
from phaseaware.chat.settings import ChatSettings
from phaseaware.errors import BudgetError, InputError
from phaseaware.profiles.model import Profile
from phaseaware.profiles.registry import get_profile
from phaseaware.tokenizers import load_tokenizer
from phaseaware.tokenizers.base import Tokenizer

__all__ = ["assemble_conversation", "assemble_append", "assemble_append_after"]

MessageLike = Mapping[str, Any] | Message
_PREFIX_CACHE = default_prefix_cache()


def _tokenizer(tokenizer: str | Tokenizer) -> Tokenizer:
    return load_tokenizer(tokenizer) if isinstance(tokenizer, str) else tokenizer


def _profile(profile: str | Profile | None, *, persistent: bool) -> Profile | None:
    prof = get_profile(profile) if isinstance(profile, str) else profile
    if prof is not None and persistent and prof.local_window is not None:
        # read on later calls, out of the raw window: plan and report residues only
        prof = replace(prof, local_window=None, local_window_accuracy=None)
    return prof


def _format(
    chat_format: str | ChatFormat,
    tokenizer: Tokenizer,
    thinking: bool,
    chat_settings: ChatSettings | None,
) -> ChatFormat:
    if isinstance(chat_format, str):
        return get_chat_format(chat_format, tokenizer, thinking=thinking, settings=chat_settings)
    if chat_settings is not None:
        raise InputError(
            "chat_settings go with a chat format name; a format object carries its own "
            "(get_chat_format(name, tokenizer, settings=...))"
        )
    return chat_format


def _policy(options: AssemblyOptions | None) -> str:
    return options.control_tokens if options is not None else AssemblyOptions().control_tokens


def _append_options(options: AssemblyOptions | None) -> AssemblyOptions:
    return options if options is not None else AssemblyOptions(repeat=False)


def assemble_conversation(
    messages: Sequence[MessageLike],
    chunks: Sequence[Chunk | str],
    *,
    tokenizer: str | Tokenizer,
    chat_format: str | ChatFormat,
    question: str,
    profile: str | Profile | None = None,
    budget_tokens: int,
    options: AssemblyOptions | None = None,
    thinking: bool = False,
    chat_settings: ChatSettings | None = None,
) -> AssemblyResult:
    """Assemble ``chunks`` into the one ``{context}`` slot of ``messages``.

    ``messages``: OpenAI-style dicts (or :class:`~phaseaware.chat.Message`), roles
    system/user/assistant/tool, exactly one ``{context}`` in all contents;
    every ``{question}`` becomes ``question``, whose key terms define default
    evidence wherever it sits. ``chat_format``: ``"deepseek-v4"``, ``"chatml"``,
    ``"hf"`` (the tokenizer's own template), ``"none"``, or a ``ChatFormat``.
    ``tokenizer``/``profile`` may be specs/names. ``result.messages`` holds the
    filled messages (``None`` for ``none``); positions index the whole prompt.
    ``chat_settings`` (:class:`~phaseaware.chat.ChatSettings`: tools, reasoning
    effort, response format, ...) go to the named format; send the same ones
    (``chat_settings.chat_template_kwargs(name)`` and its ``tools``) with the
    request. ``thinking=True`` is the older spelling of ``ChatSettings(thinking=True)``.

    Raises ``MissingSlotError``/``DuplicateSlotError`` (not exactly one slot),
    ``UnknownRoleError``, ``MessageContentError``, ``ToolResultError`` (a tool
    message answering no call, ``deepseek-v4``), ``TemplateRewriteError`` (an
    ``hf`` template drops or rewrites a message), besides what ``assemble`` raises.
    """
    tok = _tokenizer(tokenizer)
    layout = conversation_layout(
        tokenizer=tok,
        chat_format=_format(chat_format, tok, thinking, chat_settings),
        messages=messages,
        question=question,
        control_tokens=_policy(options),
    )
    return assemble(
        chunks,
        tokenizer=tok,
        chat_format=layout,
        question=question,
        profile=_profile(profile, persistent=False),
        budget_tokens=budget_tokens,
        options=options,
    )


def assemble_append(
    *,
    sent: Sequence[MessageLike],
    new: MessageLike,
    chunks: Sequence[Chunk | str],
    tokenizer: str | Tokenizer,
    chat_format: str | ChatFormat,
    question: str,
    profile: str | Profile | None = None,
    budget_tokens: int,
    options: AssemblyOptions | None = None,
    thinking: bool = False,
    persistent: bool = True,
    chat_settings: ChatSettings | None = None,
    prefix_cache: PrefixTokenCache | None = _PREFIX_CACHE,
) -> AssemblyResult:
    """Place ``chunks`` inside ``new`` (one ``{context}``), appended to ``sent`` unchanged.

    ``sent`` is taken verbatim (no placeholders) and must end where the server's
    cached text ends (usually with the assistant's reply). The result's
    ``prompt`` starts with the exact text the server holds for ``sent``; every
    chunk lies inside the new message; positions are absolute in the whole
    conversation; ``messages`` is ``sent + [new filled]``.

    Incremental: the prompt returned is cached (``prefix_cache``, an LRU capped in
    entries and bytes; the process-wide one by default, ``None``: off); when
    ``sent`` renders to a cached prompt plus more (the assistant's reply), only
    the end of that prompt, the reply and ``new`` are re-tokenized
    (:mod:`phaseaware.assembly.incremental`). The result is the same either way;
    ``result.append_path`` says which ran (``"incremental"``/``"full"``) and
    ``result.append_reason`` why not incremental.

    Raises ``PrefixRewriteError`` where the chat format would change bytes
    already sent (e.g. a user message appended after a user turn, or
    ``deepseek-v4`` thinking with ``drop_thinking``: pass
    ``get_chat_format("deepseek-v4", tok, thinking=True, drop_thinking=False)``),
    besides what :func:`assemble_conversation` raises.
    """
    tok = _tokenizer(tokenizer)
    fmt = _format(chat_format, tok, thinking, chat_settings)
    layout = append_layout(
        sent=sent, new=new, chat_format=fmt, question=question, tokenizer=tok,
        control_tokens=_policy(options),
    )  # fmt: skip
    result = assemble_tail(
        chunks,
        tokenizer=tok,
        layout=layout,
        question=question,
        profile=_profile(profile, persistent=persistent),
        budget_tokens=budget_tokens,
        options=_append_options(options),
        prefix_cache=prefix_cache,
    )
    held = layout.sent_text
    if not result.prompt.startswith(held):  # the layout checked it; the final prompt too
        offset = next(
            (i for i, (a, b) in enumerate(zip(held, result.prompt, strict=False)) if a != b),
            min(len(held), len(result.prompt)),
        )
        raise PrefixRewriteError(
            f"the assembled prompt changes the sent text at character {offset}; the "
            "server's prefix cache would miss; append after the assistant's reply",
            char_offset=offset,
        )
    outside = [p.chunk_id for p in result.placements if p.segment_char_start < len(held)]
    if outside:
        raise PrefixRewriteError(
            f"chunks {outside} were placed before the new message; put {{context}} in the "
            "new message only",
            char_offset=len(held),
        )
    return result


def assemble_append_after(
    *,
    prefix_tokens: int,
    new: MessageLike,
    chunks: Sequence[Chunk | str],
    tokenizer: str | Tokenizer,
    chat_format: str | ChatFormat,
    question: str,
    profile: str | Profile | None = None,
    budget_tokens: int,
    options: AssemblyOptions | None = None,
    thinking: bool = False,
    persistent: bool = True,
    chat_settings: ChatSettings | None = None,
) -> AssemblyResult:
    """:func:`assemble_append` from the sent prefix's token count instead of its text.

    ``prefix_tokens``: tokens the server holds before ``new`` (the last call's
    ``usage.prompt_tokens + usage.completion_tokens``; the sent conversation ends
    with that assistant reply). ``options.position_offset`` still counts tokens
    the server adds before the whole conversation. Token positions and
    ``token_count`` in the result are absolute in the conversation; ``prompt``
    is the text appended after the prefix (char offsets index into it) and
    ``messages`` is ``(new filled,)`` (``None`` for ``none``).

    Raises ``TemplateError`` where a count cannot give exact positions (the new
    message's first token merges with the sent text: ``none``) and
    ``BudgetError`` when ``budget_tokens`` leaves no room after the prefix.
    """
    tok = _tokenizer(tokenizer)
    fmt = _format(chat_format, tok, thinking, chat_settings)
    layout = append_from_count(
        prefix_tokens=prefix_tokens, new=new, chat_format=fmt, tokenizer=tok,
        control_tokens=_policy(options),
    )  # fmt: skip
    check_budget(budget_tokens)
    if budget_tokens <= prefix_tokens:
        raise BudgetError(
            f"budget_tokens={budget_tokens} leaves no room after the {prefix_tokens} tokens "
            "already sent; budget_tokens bounds the whole conversation: raise it"
        )
    opts = _append_options(options)
    result = assemble(
        chunks,
        tokenizer=tok,
        chat_format=layout,
        question=question,
        profile=_profile(profile, persistent=persistent),
        budget_tokens=budget_tokens - prefix_tokens,
        options=replace(opts, position_offset=opts.position_offset + prefix_tokens),
    )
    filled = layout.template.fill(context=result.context, question=question)
    messages = tuple(m.to_openai() for m in filled) if fmt.chat else None
    return _shifted(result, prefix_tokens, opts.position_offset, messages)


_Span = TypeVar("_Span", Placement, RepeatPlacement)


def _moved(span: _Span, n: int) -> _Span:
    """``span`` (a placement or the repeat) with its token indices moved by ``n``."""
    return replace(
        span,
        token_start=span.token_start + n,
        token_end=span.token_end + n,
        key_token_positions=tuple(t + n for t in span.key_token_positions),
    )


def _shifted(
    result: AssemblyResult,
    n: int,
    position_offset: int,
    messages: tuple[dict[str, Any], ...] | None,
) -> AssemblyResult:
    """``result`` of a delta prompt with token positions made absolute (+ ``n``).

    Residues and accuracies were taken with offset ``n + position_offset``, so
    they already belong to the absolute positions; only the indices move.
    """
    return replace(
        result,
        placements=tuple(_moved(p, n) for p in result.placements),
        repeat=_moved(result.repeat, n) if result.repeat is not None else None,
        token_count=result.token_count + n,
        position_offset=position_offset,
        messages=messages,
        # the sent n tokens are the server's (the caller's count), the delta's follow them
        unchanged_prefix_tokens=result.unchanged_prefix_tokens + n,
        unchanged_sent_tokens=n,
    )
