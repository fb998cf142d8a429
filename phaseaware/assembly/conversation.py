"""Conversations and agent loops: exact, phase-aware placement inside any chat.

Three calls behind the public doors (:mod:`phaseaware.assembly.entry`), each
taking one :class:`~phaseaware.assembly.inputs.request.AssemblyRequest` and all thin
wrappers around the one pipeline (the chat layouts of :mod:`phaseaware.chat`
decide where the context goes):

- :func:`assemble_conversation` (``assemble(messages=...)``): the caller's whole message list with one
  ``{context}`` slot (in any message, or a message of its own) and any number
  of ``{question}`` placeholders, rendered by a chat format (``deepseek-v4``,
  ``chatml``, ``hf``, ``none``).
- :func:`assemble_append`: agent loops. A conversation already sent (``sent``)
  plus ONE new message (``new``, e.g. a tool result ``"Result:\\n{context}"``):
  evidence is placed inside the new message only, by ordering and padding the
  chunks in it. Every byte already sent stays identical (checked on the final
  prompt: the server's prefix cache still hits). Positions are absolute in the
  whole conversation; ``result.messages`` is the full list, slot filled.
- :func:`assemble_append_after` (``assemble_append(prefix_tokens=...)``): the cheap
  form, with the token count of the sent prefix (e.g. ``usage.prompt_tokens +
  usage.completion_tokens`` of the last call) instead of its text. Token positions and ``token_count`` are
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

import warnings
from collections import OrderedDict
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace
from typing import Any

from phaseaware.assembly.incremental import assemble_tail
from phaseaware.assembly.inputs.chunks import Chunk
from phaseaware.assembly.inputs.options import AssemblyOptions, check_budget
from phaseaware.assembly.inputs.request import AssemblyRequest
from phaseaware.assembly.pipeline import assemble
from phaseaware.assembly.report.result import AssemblyResult, shift_positions
from phaseaware.assembly.retokenize.prefix import PrefixTokenCache, default_prefix_cache
from phaseaware.assembly.retokenize.windowed import ChunkTokenCache, default_cache
from phaseaware.chat.append import AppendLayout, append_from_count, append_layout
from phaseaware.chat.errors import PrefixRewriteError
from phaseaware.chat.formats import ChatFormat, get_chat_format
from phaseaware.chat.layout import conversation_layout
from phaseaware.chat.messages import Message
from phaseaware.chat.settings import ChatSettings
from phaseaware.errors import BudgetError, InputError, PhaseawareWarning
from phaseaware.profiles.model import Profile
from phaseaware.tokenizers.base import Tokenizer

__all__ = [
    "PrefixRewriteWarning",
    "assemble_append",
    "assemble_append_after",
    "assemble_conversation",
]

MessageLike = Mapping[str, Any] | Message
_PREFIX_CACHE = default_prefix_cache()
_CHUNK_CACHE = default_cache()
_APPEND_DEFAULT = AssemblyOptions(repeat=False)  # append alignment restates nothing unless told


@dataclass(frozen=True)
class _Resolved:
    """A request's objects: what every conversation entry point needs."""

    tokenizer: Tokenizer
    chat_format: ChatFormat
    profile: Profile | None
    budget_tokens: int
    options: AssemblyOptions


def _resolve(
    request: AssemblyRequest, *, default: AssemblyOptions | None, persistent: bool
) -> _Resolved:
    """``request`` as objects; a persistent append plans residues only (the message is
    read on later calls, out of the raw local window)."""
    req = request.resolve(default_options=default)
    tok = req.tokenizer_object
    prof = req.profile_object
    if prof is not None and persistent and prof.local_window is not None:
        prof = replace(prof, local_window=None, local_window_accuracy=None)
    if req.budget_tokens is None:
        raise InputError("pass budget_tokens= (the most tokens of the whole conversation)")
    options = req.options if isinstance(req.options, AssemblyOptions) else AssemblyOptions()
    return _Resolved(
        tokenizer=tok,
        chat_format=_format(req.chat_format, tok, req.thinking, req.chat_settings()),
        profile=prof,
        budget_tokens=req.budget_tokens,
        options=options,
    )


def _format(
    chat_format: object,
    tokenizer: Tokenizer,
    thinking: bool,
    chat_settings: ChatSettings | None,
) -> ChatFormat:
    if isinstance(chat_format, str):
        return get_chat_format(chat_format, tokenizer, thinking=thinking, settings=chat_settings)
    if not isinstance(chat_format, ChatFormat):
        raise InputError(
            "a conversation needs a chat format: a name ('chatml', 'deepseek-v4', 'hf', "
            f"'none') or a ChatFormat, got {type(chat_format).__name__}"
        )
    if chat_settings is not None:
        raise InputError(
            "chat settings go with a chat format name; a format object carries its own "
            "(get_chat_format(name, tokenizer, settings=...))"
        )
    return chat_format


def assemble_conversation(
    messages: Sequence[MessageLike],
    chunks: Sequence[Chunk | str],
    *,
    request: AssemblyRequest,
    question: str,
    cache: ChunkTokenCache | None = _CHUNK_CACHE,
) -> AssemblyResult:
    """Assemble ``chunks`` into the one ``{context}`` slot of ``messages``
    (``phaseaware.assemble(chunks, messages=...)``).

    ``messages``: OpenAI-style dicts (or :class:`~phaseaware.chat.Message`), roles
    system/user/assistant/tool, exactly one ``{context}`` in all contents;
    every ``{question}`` becomes ``question``, whose key terms define default
    evidence wherever it sits. ``result.messages`` holds the filled messages
    (``None`` for ``none``); positions index the whole prompt. The request's chat
    settings (tools, reasoning effort, ...) go to the named format; send the same
    ones (``settings.chat_template_kwargs(name)`` and its ``tools``) with the request.

    Raises ``MissingSlotError``/``DuplicateSlotError`` (not exactly one slot),
    ``UnknownRoleError``, ``MessageContentError``, ``ToolResultError`` (a tool
    message answering no call, ``deepseek-v4``), ``TemplateRewriteError`` (an
    ``hf`` template drops or rewrites a message), besides what ``assemble`` raises.
    """
    r = _resolve(request, default=None, persistent=False)
    layout = conversation_layout(
        tokenizer=r.tokenizer,
        chat_format=r.chat_format,
        messages=messages,
        question=question,
        control_tokens=r.options.control_tokens,
    )
    return assemble(
        chunks,
        tokenizer=r.tokenizer,
        chat_format=layout,
        question=question,
        profile=r.profile,
        budget_tokens=r.budget_tokens,
        options=r.options,
        cache=cache,
    )


def assemble_append(
    *,
    sent: Sequence[MessageLike],
    new: MessageLike,
    chunks: Sequence[Chunk | str],
    request: AssemblyRequest,
    question: str,
    persistent: bool = True,
    prefix_cache: PrefixTokenCache | None = _PREFIX_CACHE,
    strict_prefix: bool = False,
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

    Where the chat format re-renders sent text by its own documented rule (DeepSeek
    thinking mode drops earlier reasoning when a tool or user message arrives), the
    whole conversation is assembled instead: positions stay exact, the server's prefix
    cache misses from the first changed character, ``append_path="full"`` and
    ``append_reason`` names the cause and the fix (``drop_thinking=False`` keeps the
    prefix), with one :class:`PrefixRewriteWarning` per conversation;
    ``strict_prefix=True`` refuses instead (``PrefixRewriteError``). Raises
    ``PrefixRewriteError`` where the format would change sent bytes for any other
    reason (e.g. a user message appended after a user turn), besides what
    :func:`assemble_conversation` raises.
    """
    r = _resolve(request, default=_APPEND_DEFAULT, persistent=persistent)
    layout = append_layout(
        sent=sent, new=new, chat_format=r.chat_format, question=question,
        tokenizer=r.tokenizer, control_tokens=r.options.control_tokens, strict=strict_prefix,
    )  # fmt: skip
    changed = None if layout.strict else layout.rewritten_at(question)
    reason = "" if changed is None else _rewrite_reason(layout, changed)
    result = assemble_tail(
        chunks,
        tokenizer=r.tokenizer,
        layout=layout,
        question=question,
        profile=r.profile,
        budget_tokens=r.budget_tokens,
        options=r.options,
        prefix_cache=prefix_cache,
        full_because=reason,
    )
    if reason:  # the format's own drop rule: exact, but the prefix cache misses
        _warn_once(layout, reason)
        return result
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


class PrefixRewriteWarning(PhaseawareWarning):
    """An append step re-rendered text already sent (the chat format's own drop rule)."""


_WARNED_MAX = 1024
_warned: OrderedDict[tuple[object, ...], None] = OrderedDict()  # conversations warned about


def _rewrite_reason(layout: AppendLayout, changed: int) -> str:
    """Why a step whose format rewrites sent text at char ``changed`` is assembled whole."""
    return (
        f"chat format {layout.chat_format.name!r} thinking mode drops earlier reasoning when "
        f"a tool or user message arrives (drop_thinking), so the text already sent changes at "
        f"character {changed}: the whole conversation was assembled (positions exact; the "
        "server's prefix cache misses from there); pass ChatSettings(thinking=True, "
        "drop_thinking=False) to keep the prefix, or strict_prefix=True to refuse such a step"
    )


def _warn_once(layout: AppendLayout, reason: str) -> None:
    """One ``PrefixRewriteWarning`` per conversation (known by its format and opening text)."""
    opening = layout.template.messages[:2]  # a conversation is known by how it starts
    key = (layout.chat_format.name, *((m.role, m.content[:512]) for m in opening))
    if key not in _warned:
        _warned[key] = None
        while len(_warned) > _WARNED_MAX:
            _warned.popitem(last=False)
        warnings.warn(reason, PrefixRewriteWarning, stacklevel=4)


def assemble_append_after(
    *,
    prefix_tokens: int,
    new: MessageLike,
    chunks: Sequence[Chunk | str],
    request: AssemblyRequest,
    question: str,
    persistent: bool = True,
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
    r = _resolve(request, default=_APPEND_DEFAULT, persistent=persistent)
    tok, fmt, budget_tokens, opts = r.tokenizer, r.chat_format, r.budget_tokens, r.options
    layout = append_from_count(
        prefix_tokens=prefix_tokens, new=new, chat_format=fmt, tokenizer=tok,
        control_tokens=opts.control_tokens,
    )  # fmt: skip
    check_budget(budget_tokens)
    if budget_tokens <= prefix_tokens:
        raise BudgetError(
            f"budget_tokens={budget_tokens} leaves no room after the {prefix_tokens} tokens "
            "already sent; budget_tokens bounds the whole conversation: raise it"
        )
    result = assemble(
        chunks,
        tokenizer=tok,
        chat_format=layout,
        question=question,
        profile=r.profile,
        budget_tokens=budget_tokens - prefix_tokens,
        options=replace(opts, position_offset=opts.position_offset + prefix_tokens),
    )
    filled = layout.filled(context=result.context, question=question)
    messages = tuple(m.to_openai() for m in filled) if fmt.chat else None
    return _shifted(result, prefix_tokens, opts.position_offset, messages)


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
        shift_positions(result, tokens=n),
        position_offset=position_offset,
        messages=messages,
        # the sent n tokens are the server's (the caller's count), the delta's follow them
        unchanged_prefix_tokens=result.unchanged_prefix_tokens + n,
        unchanged_sent_tokens=n,
    )
