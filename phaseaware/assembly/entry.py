"""The two public doors: :func:`assemble` and :func:`assemble_append`.

Both take the shared arguments either as keywords (``tokenizer=``, ``chat_format=``,
``profile=``, ``budget_tokens=``, ``options=``, ``settings=``, ``thinking=``,
``position_offset=``; specs or objects) or as one :class:`AssemblyRequest`
(``request=``), never both. :func:`assemble` places chunks into one prompt: the
single-turn conversation of ``chat_format`` (``system=``), or the caller's
``messages`` with one ``{context}`` slot. :func:`assemble_append` places them into
one new message after a conversation already sent: its messages (``sent=``) or its
token count (``prefix_tokens=``). Everything else is orchestration below
(``pipeline``, ``conversation``, ``incremental``).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from phaseaware.assembly import conversation
from phaseaware.assembly.inputs.chunks import Chunk
from phaseaware.assembly.inputs.options import AssemblyOptions
from phaseaware.assembly.inputs.request import (
    AssemblyRequest,
    FormatRef,
    OptionsRef,
    ProfileRef,
    SettingsRef,
)
from phaseaware.assembly.pipeline import assemble_from_specs
from phaseaware.assembly.report.result import AssemblyResult
from phaseaware.assembly.retokenize.prefix import PrefixTokenCache, default_prefix_cache
from phaseaware.assembly.retokenize.windowed import ChunkTokenCache, default_cache
from phaseaware.chat.messages import Message
from phaseaware.errors import InputError
from phaseaware.tokenizers.base import Tokenizer

__all__ = ["AssemblyRequest", "assemble", "assemble_append"]

MessageLike = Mapping[str, Any] | Message
_CHUNK_CACHE = default_cache()
_PREFIX_CACHE = default_prefix_cache()


def request_of(
    request: AssemblyRequest | None,
    *,
    tokenizer: str | Tokenizer | None,
    chat_format: FormatRef,
    profile: ProfileRef,
    budget_tokens: int | None,
    options: OptionsRef,
    settings: SettingsRef,
    thinking: bool,
    position_offset: int | None,
) -> AssemblyRequest:
    """``request``, or one built from the keywords (``InputError`` when both are given)."""
    stated = {
        "tokenizer": tokenizer, "chat_format": chat_format, "profile": profile,
        "budget_tokens": budget_tokens, "options": options, "settings": settings,
        "thinking": thinking or None, "position_offset": position_offset,
    }  # fmt: skip
    given = sorted(k for k, v in stated.items() if v is not None)
    if request is not None:
        if not isinstance(request, AssemblyRequest):
            raise InputError(
                f"request must be a phaseaware.AssemblyRequest, got {type(request).__name__}"
            )
        if given:
            raise InputError(
                f"pass either request= or its fields, not both (also given: {', '.join(given)})"
            )
        return request
    if tokenizer is None:
        raise InputError(
            "pass tokenizer= (a spec such as 'deepseek-v4' or a Tokenizer) or request="
        )
    return AssemblyRequest(
        tokenizer=tokenizer, chat_format="none" if chat_format is None else chat_format,
        profile=profile, budget_tokens=budget_tokens, options=options, settings=settings,
        thinking=thinking, position_offset=position_offset,
    )  # fmt: skip


def assemble(
    chunks: Sequence[Chunk | str],
    *,
    question: str,
    request: AssemblyRequest | None = None,
    tokenizer: str | Tokenizer | None = None,
    chat_format: FormatRef = None,
    profile: ProfileRef = None,
    budget_tokens: int | None = None,
    options: OptionsRef = None,
    settings: SettingsRef = None,
    thinking: bool = False,
    position_offset: int | None = None,
    system: str | None = None,
    messages: Sequence[MessageLike] | None = None,
    cache: ChunkTokenCache | None = _CHUNK_CACHE,
) -> AssemblyResult:
    """Assemble ``chunks`` into a prompt of at most ``budget_tokens`` tokens.

    The prompt: ``chat_format``'s single-turn conversation ``[system?, user(context +
    "\\n\\n" + question)]`` (a name such as ``none``, ``chatml``, ``hf``, ``deepseek-v4``;
    a ``ChatFormat``; or a layout built from one, ``conversation_layout``), or, with
    ``messages``, the caller's conversation: OpenAI-style dicts (or ``Message``) with
    exactly one ``{context}`` and any ``{question}`` placeholders, rendered by the
    named format (``system`` then goes into the messages).

    ``tokenizer``: a spec (``"deepseek-v4"``, ``"tiktoken:o200k_base"``, ...) or a
    ``Tokenizer``; ``profile``: a model name, profile path or ``Profile``; ``options``:
    ``AssemblyOptions`` or its dict; ``settings``: ``ChatSettings`` (reasoning
    effort, tools, ...) for a named format, ``thinking=True`` its short form;
    ``position_offset``: tokens the server adds before the prompt. ``request``: all
    of these as one :class:`AssemblyRequest` instead. ``cache``: chunk tokenizations
    reused across calls (``None``: none); caching never changes the result.

    Raises ``InputError`` (empty chunk list, bad evidence, bad options),
    ``BudgetError`` (budget below the template + question),
    ``FingerprintMismatchError``/``PeriodMismatchError`` (profile vs tokenizer or
    ``options.period``), ``VerificationError`` (placement not confirmed), and with
    ``messages`` the slot and message errors (``MissingSlotError``, ...).
    """
    req = request_of(
        request, tokenizer=tokenizer, chat_format=chat_format, profile=profile,
        budget_tokens=budget_tokens, options=options, settings=settings, thinking=thinking,
        position_offset=position_offset,
    )  # fmt: skip
    if messages is not None:
        if system:
            raise InputError("pass the system prompt inside messages, or system= without messages")
        return conversation.assemble_conversation(
            messages, chunks, request=req, question=question, cache=cache
        )
    r = req.resolve()
    if r.budget_tokens is None:
        raise InputError("pass budget_tokens= (the most tokens of the whole prompt)")
    return assemble_from_specs(
        chunks,
        tokenizer=r.tokenizer,
        chat_format="none" if r.chat_format is None else r.chat_format,
        question=question,
        system=system,
        profile=r.profile_object,
        budget_tokens=r.budget_tokens,
        options=r.options if isinstance(r.options, AssemblyOptions) else None,
        thinking=r.thinking,
        cache=cache,
        settings=r.chat_settings(),
    )


def assemble_append(
    *,
    new: MessageLike,
    chunks: Sequence[Chunk | str],
    question: str,
    sent: Sequence[MessageLike] | None = None,
    prefix_tokens: int | None = None,
    request: AssemblyRequest | None = None,
    tokenizer: str | Tokenizer | None = None,
    chat_format: FormatRef = None,
    profile: ProfileRef = None,
    budget_tokens: int | None = None,
    options: OptionsRef = None,
    settings: SettingsRef = None,
    thinking: bool = False,
    position_offset: int | None = None,
    persistent: bool = True,
    prefix_cache: PrefixTokenCache | None = _PREFIX_CACHE,
    strict_prefix: bool = False,
) -> AssemblyResult:
    """Place ``chunks`` inside ``new`` (one ``{context}``), after a conversation already sent.

    Give the sent conversation as ``sent`` (its messages, taken verbatim; usually
    ending with the assistant's reply) or, the cheap form, as ``prefix_tokens`` (its
    token count, e.g. the last call's ``usage.prompt_tokens + usage.completion_tokens``).

    With ``sent``: the result's ``prompt`` starts with the exact text the server holds
    for ``sent`` (checked on the final prompt, so its prefix cache still hits); every
    chunk lies inside ``new``; positions are absolute in the whole conversation;
    ``messages`` is ``sent + [new filled]``. Incremental: the prompt is cached
    (``prefix_cache``; ``None``: off) and the next step re-tokenizes only its tail;
    ``result.append_path`` says which path ran and ``append_reason`` why not
    incremental. With ``prefix_tokens``: positions and ``token_count`` are absolute;
    ``prompt`` is the appended text alone and ``messages`` the new message alone.

    ``budget_tokens`` bounds the whole conversation. ``persistent`` (default): plan
    for the residues the message has on every later call (out of the raw local
    window); ``False``: this call only. Without ``options`` nothing is restated
    (``AssemblyOptions(repeat=False)``). The shared arguments as for :func:`assemble`.

    Where the chat format re-renders sent text by its own rule (``deepseek-v4`` thinking
    with ``drop_thinking``), the whole conversation is assembled: exact positions,
    ``append_path="full"``, ``append_reason`` naming the cause and the fix
    (``drop_thinking=False`` keeps the prefix) and one ``PrefixRewriteWarning`` per
    conversation; ``strict_prefix=True`` raises ``PrefixRewriteError`` instead. Raises
    ``PrefixRewriteError`` where the format would change sent bytes for another reason
    (a user message appended after a user turn), ``TemplateError`` where a count cannot
    give exact positions, besides what :func:`assemble` raises.
    """
    req = request_of(
        request, tokenizer=tokenizer, chat_format=chat_format, profile=profile,
        budget_tokens=budget_tokens, options=options, settings=settings, thinking=thinking,
        position_offset=position_offset,
    )  # fmt: skip
    if (sent is None) == (prefix_tokens is None):
        raise InputError(
            "pass exactly one of sent= (the messages already sent) and prefix_tokens= "
            "(their token count)"
        )
    if sent is not None:
        return conversation.assemble_append(
            sent=sent, new=new, chunks=chunks, request=req, question=question,
            persistent=persistent, prefix_cache=prefix_cache, strict_prefix=strict_prefix,
        )  # fmt: skip
    assert prefix_tokens is not None
    return conversation.assemble_append_after(
        prefix_tokens=prefix_tokens, new=new, chunks=chunks, request=req, question=question,
        persistent=persistent,
    )  # fmt: skip
