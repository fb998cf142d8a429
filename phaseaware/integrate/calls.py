"""The calls an adapter makes: build the conversation, assemble, align an append, check usage.

Every function takes a resolved :class:`~phaseaware.integrate.Target` and framework-free
values: OpenAI-style message dicts and :class:`~phaseaware.integrate.SourceRecord` lists.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import replace
from typing import Any, Literal

from phaseaware.assembly.entry import assemble, assemble_append
from phaseaware.assembly.inputs.chunks import Chunk
from phaseaware.assembly.report.result import AssemblyResult
from phaseaware.chat.errors import DuplicateSlotError
from phaseaware.chat.formats import markers_of
from phaseaware.chat.layout import ConversationLayout, RenderedPrompt, conversation_layout
from phaseaware.chat.messages import ConversationTemplate, Part, Placeholder, parse_messages
from phaseaware.chat.untrusted import clean_template
from phaseaware.endpoints import ON_MISMATCH, UsageCheck, check_prompt_tokens
from phaseaware.endpoints.usage import check_identity
from phaseaware.errors import InputError, UnsupportedRequestError
from phaseaware.integrate.records import SourceRecord, merge_records
from phaseaware.integrate.target import Target
from phaseaware.tokenizers.control import scanner_for

__all__ = [
    "FixedLayout",
    "OnMismatch",
    "append_records",
    "assemble_records",
    "check_on_mismatch",
    "check_usage",
    "conversation",
    "refuse_tools",
    "rendered_ids",
    "rendered_tokens",
    "reported_identity",
]

OnMismatch = Literal["warn", "raise", "ignore"]


def check_on_mismatch(value: object, *, name: str = "on_mismatch") -> OnMismatch:
    """``value`` if it is ``"warn"``, ``"raise"`` or ``"ignore"``; else ``InputError``."""
    if value not in ON_MISMATCH:
        raise InputError(f"{name} must be one of {', '.join(ON_MISMATCH)}, got {value!r}")
    return value  # type: ignore[return-value]


class FixedLayout:
    """``prefix + context + suffix`` with fixed text, for callers that see no messages (a
    document compressor is told the text around the documents)."""

    name = "fixed"
    chat = False

    def __init__(self, prefix: str, suffix: str) -> None:
        self.prefix = prefix
        self.suffix = suffix

    def split(self, *, system: str | None, question: str) -> tuple[str, str]:
        return self.prefix, self.suffix

    def render(self, *, system: str | None, context: str, question: str) -> RenderedPrompt:
        return RenderedPrompt(
            text=self.prefix + context + self.suffix,
            context_start=len(self.prefix),
            context_end=len(self.prefix) + len(context),
            messages=None,
        )


def conversation(
    target: Target,
    messages: Sequence[Mapping[str, Any]],
    *,
    slot_marker: str | None = None,
    question: str | None = None,
) -> ConversationLayout:
    """The layout of ``messages`` (OpenAI-style dicts) rendered by the target's chat format.

    Without ``slot_marker``: one ``{context}`` and any ``{question}`` placeholders, as
    :func:`phaseaware.assemble` reads ``messages``. With ``slot_marker`` (a random
    string the framework formatted its template with, where the context goes): the
    message holding it once is split there and nothing else is read as a placeholder,
    so braces in the caller's variables stay text. Control tokens in the messages are
    broken (or refused) by ``options.control_tokens``, as for every conversation.
    """
    fmt = target.require_format()
    policy = target.options.control_tokens
    if slot_marker is None:
        return conversation_layout(
            tokenizer=target.tokenizer,
            chat_format=fmt,
            messages=messages,
            question=question,
            control_tokens=policy,
        )
    parsed = parse_messages(messages)
    parts: list[list[Part]] = []
    for index, message in enumerate(parsed):
        pieces = message.content.split(slot_marker)
        if len(pieces) > 2:
            raise DuplicateSlotError(
                f"message {index} holds {{context}} {len(pieces) - 1} times; keep one"
            )
        slot: list[Part] = [pieces[0], Placeholder.CONTEXT, *pieces[1:]]
        parts.append(slot if len(pieces) == 2 else [message.content])
    template = ConversationTemplate.from_parts(parsed, parts)  # exactly one slot, checked
    scanner = scanner_for(target.tokenizer, markers=markers_of(fmt), policy=policy)
    template, neutralized = clean_template(template, scanner)
    return ConversationLayout(
        template, fmt, question=question, neutralized=neutralized, scanner=scanner
    )


def assemble_records(
    records: Sequence[SourceRecord],
    *,
    target: Target,
    layout: Any,
    question: str,
    what: str = "documents",
) -> AssemblyResult:
    """Assemble ``records`` into ``layout`` (a conversation layout, or any ``PromptLayout``).

    No records give the layout with an empty context (and nothing dropped). Copies under
    one id are merged (``result.merged_duplicates``, record indices) unless
    ``options.duplicate_ids="error"`` (:func:`~phaseaware.integrate.merge_records`).
    """
    if not isinstance(question, str):
        raise InputError(f"the question must be a string, got {type(question).__name__}")
    merged = merge_records(records, what=what, duplicate_ids=target.options.duplicate_ids)
    chunks: Sequence[Chunk] = merged.chunks
    result = assemble(
        chunks or [Chunk(text="", id="doc-none")],
        request=target.request(layout=layout),
        question=question,
    )
    if not chunks:  # the stand-in empty chunk is not the caller's: keep it out of the report
        result = replace(result, dropped=())
    return replace(result, merged_duplicates=merged.merged)


def append_records(
    records: Sequence[SourceRecord],
    *,
    target: Target,
    sent: Sequence[Mapping[str, Any]],
    new: Mapping[str, Any],
    question: str,
    what: str = "documents",
    persistent: bool = True,
) -> AssemblyResult | None:
    """Agent loops: :func:`phaseaware.assemble_append` itself over the records (``None``
    for no records). ``sent`` keeps its bytes; the records go into ``new`` (one
    ``{context}``, any ``{question}``); ``persistent`` as there (plan for later calls,
    out of the raw local window). Options: the target's ``append_options``; copies
    under one id merged as in :func:`assemble_records`."""
    merged = merge_records(records, what=what, duplicate_ids=target.append_options.duplicate_ids)
    if not merged.chunks:
        return None
    result = assemble_append(
        sent=sent,
        new=new,
        chunks=merged.chunks,
        request=target.request(append=True),
        question=question,
        persistent=persistent,
    )
    return replace(result, merged_duplicates=merged.merged)


def rendered_tokens(target: Target, messages: Sequence[Mapping[str, Any]]) -> int:
    """Tokens of ``messages`` as the target's chat format renders them (generation prompt
    included): the count a server of that format reports, less the endpoint's offset."""
    return len(rendered_ids(target, messages))


def rendered_ids(target: Target, messages: Sequence[Mapping[str, Any]]) -> list[int]:
    """The token ids of ``messages`` as the target's chat format renders them (generation
    prompt included): what a server of that format returns as the prompt's ids, after
    the endpoint's offset."""
    text = target.require_format().render(parse_messages(messages), add_generation_prompt=True)
    return list(target.tokenizer.encode(text))


def check_usage(
    target: Target,
    *,
    planned_tokens: int,
    reported_tokens: int | None,
    on_mismatch: OnMismatch,
    offset: int | None = None,
    offset_name: str = "position_offset",
    served_model: str | None = None,
    system_fingerprint: str | None = None,
    count_only_reason: str = "",
) -> UsageCheck | None:
    """Planned vs reported prompt tokens (``None`` when the server reported none).

    Expects the target's offset (any of its offsets for a varying endpoint), or
    ``offset`` when the caller gives one. ``offset_name`` is the caller's parameter
    that sets it, named in the message's fix (``offset=``, ``position_offset=``).
    ``served_model`` / ``system_fingerprint``: what the response reports (its
    ``model`` and ``system_fingerprint``); one that differs from the endpoint record's
    warns that the served checkpoint changed (:func:`phaseaware.endpoints.check_identity`;
    not with ``on_mismatch="ignore"``). ``count_only_reason``: why the prompt's ids were
    not compared, where the caller wanted them (on the check and in its message).
    """
    record = target.endpoint
    if record is not None and on_mismatch != "ignore":
        check_identity(
            {"model": served_model, "system_fingerprint": system_fingerprint},
            model=record.served_model,
            system_fingerprint=record.system_fingerprint,
        )
    if reported_tokens is None:
        return None
    expected, offsets = target.usage_offsets
    if offset is not None:
        expected, offsets = offset, None
    return check_prompt_tokens(
        planned_tokens=planned_tokens,
        reported_tokens=reported_tokens,
        offset=expected,
        offsets=offsets,
        on_mismatch=on_mismatch,
        offset_name=offset_name,
        count_only_reason=count_only_reason,
    )


def reported_identity(response: Any) -> tuple[str | None, str | None]:
    """``(model, system_fingerprint)`` of an OpenAI-style response (an ``openai`` object or
    a mapping, e.g. a LlamaIndex ``ChatResponse.raw``): what :func:`check_usage` compares
    with the endpoint record's; ``None`` for what is absent or empty."""

    def field(name: str) -> str | None:
        value = (
            response.get(name) if isinstance(response, Mapping) else getattr(response, name, None)
        )
        return value if isinstance(value, str) and value else None

    return field("model"), field("system_fingerprint")


def refuse_tools(target: Target, tools: Sequence[object] | None, *, fix: str) -> None:
    """Refuse a request that binds ``tools`` (``UnsupportedRequestError`` naming ``fix``),
    for an adapter that cannot turn its framework's tools into OpenAI schemas. Adapters
    that can use :meth:`Target.with_tools`: the tools then go into the plan."""
    if not tools:
        return
    fmt = target.chat_format.name if target.chat_format is not None else "none"
    raise UnsupportedRequestError(
        f"the model request binds {len(tools)} tool(s) that are not in the plan (chat "
        f"format {fmt!r}): a server that writes their schemas into the prompt puts every "
        f"planned position off; {fix}"
    )
