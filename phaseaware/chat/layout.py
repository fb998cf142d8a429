"""Prompt layouts: the text a chat format writes around the one context slot.

A :class:`PromptLayout` turns ``(system, context, question)`` into the exact
prompt string the tokenizer sees (BOS and format markers included) and reports
where the context sits (:class:`RenderedPrompt`, character offsets). Because
BPE merges across boundaries, callers never add token counts of parts; they
render and re-tokenize. Invariant of every layout::

    prefix, suffix = layout.split(system=s, question=q)
    layout.render(system=s, context=c, question=q).text == prefix + c + suffix

The chat formats (:mod:`phaseaware.chat.formats`) are the only renderer: a
:class:`ConversationLayout` is a conversation with one ``{context}`` slot,
rendered by one format and checked against it. The single-turn call is a
conversation too: ``conversation_layout(system=s, ...)`` without ``messages``
builds ``[system?, user(context + "\\n\\n" + question)]``, so e.g. ``none`` is
``BOS + [system + "\\n\\n"] + context + "\\n\\n" + question`` and ``chatml`` is
``<|im_start|>role\\n...<|im_end|>\\n`` turns ending with the open assistant turn.

``question`` fills every ``{question}`` placeholder and is the text whose key
terms define default evidence, wherever it sits (or does not appear at all). The
system prompt belongs in the messages: ``system`` must be ``None`` or ``""``.
``RenderedPrompt.messages`` holds the filled messages for APIs that take
messages instead of text (``None`` for the plain ``none`` format).
"""

from __future__ import annotations

import uuid
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace
from typing import Any, Protocol, runtime_checkable

from phaseaware.caches import BoundedCache
from phaseaware.chat.deepseek_encoding import DeepSeekFormat
from phaseaware.chat.errors import TemplateRewriteError
from phaseaware.chat.formats import ChatFormat, get_chat_format, markers_of
from phaseaware.chat.hf import HFChatFormat
from phaseaware.chat.messages import (
    ConversationTemplate,
    Message,
    parse_conversation,
    simple_conversation,
)
from phaseaware.chat.settings import ChatSettings
from phaseaware.chat.untrusted import check_settings_text, clean_template, frame_template
from phaseaware.errors import ControlTokenError, InputError
from phaseaware.tokenizers.base import Tokenizer
from phaseaware.tokenizers.control import BREAK, ControlScanner, Neutralized, scanner_for

__all__ = [
    "RenderedPrompt",
    "PromptLayout",
    "ConversationLayout",
    "conversation_layout",
    "with_system",
]

_CACHE_SIZE = 64


@dataclass(frozen=True)
class RenderedPrompt:
    """A full prompt and where the context sits in it (character offsets into ``text``)."""

    text: str
    context_start: int
    context_end: int
    messages: tuple[dict[str, Any], ...] | None

    @property
    def context(self) -> str:
        return self.text[self.context_start : self.context_end]


@runtime_checkable
class PromptLayout(Protocol):
    """Fixed text around the context; ``render(...).text == prefix + context + suffix``."""

    @property
    def name(self) -> str: ...

    def render(self, *, system: str | None, context: str, question: str) -> RenderedPrompt: ...

    def split(self, *, system: str | None, question: str) -> tuple[str, str]: ...


def _check_text(name: str, value: object) -> str:
    if not isinstance(value, str):
        raise InputError(f"{name} must be a string, got {type(value).__name__}")
    return value


class ConversationLayout:
    """Prefix and suffix around the one context slot of a conversation (see module doc)."""

    def __init__(
        self,
        template: ConversationTemplate,
        chat_format: ChatFormat,
        *,
        question: str | None = None,
        add_generation_prompt: bool = True,
        neutralized: tuple[Neutralized, ...] = (),
        scanner: ControlScanner | None = None,
    ) -> None:
        if not isinstance(template, ConversationTemplate):
            raise InputError(
                "template must be a ConversationTemplate; build one with parse_conversation()"
            )
        self.template = template
        self.chat_format = chat_format
        self.question = question
        self.add_generation_prompt = add_generation_prompt
        self.neutralized = neutralized  # control strings broken in the messages
        # message text is untrusted: cleaned again once the question is in (None: trusted)
        self.scanner = scanner
        self._splits: BoundedCache[str, tuple[str, str]] = BoundedCache(max_entries=_CACHE_SIZE)
        self._frames: BoundedCache[str, tuple[ConversationTemplate, tuple[Neutralized, ...]]] = (
            BoundedCache(max_entries=_CACHE_SIZE)
        )
        self._own_controls: int | None = None

    @property
    def name(self) -> str:
        return self.chat_format.name

    @property
    def slot_index(self) -> int:
        """Index of the message that holds the context."""
        return self.template.slot_index

    def __repr__(self) -> str:
        return (
            f"ConversationLayout({len(self.template.messages)} messages, slot in message "
            f"{self.slot_index}, format={self.chat_format!r})"
        )

    def _question(self, system: str | None, question: str) -> str:
        if system:
            raise InputError(
                "a conversation layout holds its system prompt in its messages; pass "
                "system=None and build the layout with conversation_layout(system=...) "
                "(or put the system text into the first message)"
            )
        return _check_text("question", question)

    def _framed(self, question: str) -> tuple[ConversationTemplate, tuple[Neutralized, ...]]:
        """The template with ``question`` filled in and each message cleaned after the join
        (:func:`~phaseaware.chat.untrusted.frame_template`), and what that broke."""
        if self.scanner is None:
            return self.template, ()
        cached = self._frames.get(question)
        if cached is None:
            cached = frame_template(self.template, self.scanner, question=question)
            self._frames.put(question, cached)
        return cached

    def neutralized_for(self, question: str) -> tuple[Neutralized, ...]:
        """``neutralized`` plus what was broken where ``question`` joins message text."""
        return self.neutralized + self._framed(_check_text("question", question))[1]

    def filled(self, *, context: str, question: str) -> tuple[Message, ...]:
        """The messages with the slot holding ``context`` and ``{question}`` replaced
        (message text cleaned after the join when the layout holds a scanner)."""
        return self._framed(question)[0].fill(context=context, question=question)

    def _check_controls(self, prefix: str, suffix: str) -> None:
        """Refuse a prefix and suffix holding more control strings than the conversation
        rendered with stand-ins that join nothing (:data:`BREAK` for every non-empty
        message text and placeholder): a control string formed where message text meets
        the question, another message or the chat format's own text."""
        if self.scanner is None:
            return
        if self._own_controls is None:
            stand_ins = [
                _stand_in(m, bool(parts))
                for m, parts in zip(self.template.messages, self.template.parts, strict=True)
            ]
            self._own_controls = self.scanner.count(self.render_text(stand_ins))
        found = self.scanner.count(prefix) + self.scanner.count(suffix)
        if found > self._own_controls:
            raise ControlTokenError(
                f"the conversation renders {found} control tokens where its template has "
                f"{self._own_controls}: message text forms a control token with the text "
                "next to it (the question, another message or the chat format's own text); "
                "remove the partial control string at the edge of the message or question"
            )

    def messages_for(self, *, context: str, question: str) -> tuple[dict[str, Any], ...]:
        """OpenAI-style messages of the filled conversation (for APIs that take messages)."""
        return tuple(m.to_openai() for m in self.filled(context=context, question=question))

    def render_text(self, messages: Sequence[Message]) -> str:
        return self.chat_format.render(messages, add_generation_prompt=self.add_generation_prompt)

    def split(self, *, system: str | None, question: str) -> tuple[str, str]:
        """Text before and after the slot (characters; BOS and markers included)."""
        question = self._question(system, question)
        cached = self._splits.get(question)
        if cached is not None:
            return cached
        sentinel = f"PHASEAWARE_CONTEXT_{uuid.uuid4().hex}"
        text = self.render_text(self.filled(context=sentinel, question=question))
        copies = text.count(sentinel)
        if copies != 1:
            raise TemplateRewriteError(
                f"chat format {self.name!r} renders the context slot {copies} times; "
                "use chat format chatml or deepseek-v4",
                index=self.slot_index,
                change="dropped" if copies == 0 else "repeated",
            )
        prefix, suffix = text.split(sentinel)
        self._check_controls(prefix, suffix)
        self._splits.put(question, (prefix, suffix))
        return prefix, suffix

    def render(self, *, system: str | None, context: str, question: str) -> RenderedPrompt:
        """``prefix + context + suffix``, confirmed by rendering the filled messages."""
        context = _check_text("context", context)
        prefix, suffix = self.split(system=system, question=question)
        filled = self.filled(context=context, question=question)
        text = prefix + context + suffix
        if self.render_text(filled) != text:
            raise TemplateRewriteError(
                f"chat format {self.name!r} rewrites message {self.slot_index} once the "
                "context is in it (e.g. strips whitespace); strip leading/trailing whitespace "
                "from the context, or use chat format chatml",
                index=self.slot_index,
                change="rewritten",
            )
        return RenderedPrompt(
            text=text,
            context_start=len(prefix),
            context_end=len(prefix) + len(context),
            messages=tuple(m.to_openai() for m in filled) if self.chat_format.chat else None,
        )


# stand-ins by message object (the entry holds it, so its id is not reused meanwhile): an
# agent's conversation, parsed to the same objects each step, is not copied again
_STAND_INS: BoundedCache[tuple[int, bool], tuple[Message, Message]] = BoundedCache(
    max_entries=4096, name="chat.layout stand-in messages"
)


def _stand_in(message: Message, has_text: bool) -> Message:
    """``message`` with :data:`BREAK` for its text and reasoning where they are non-empty."""
    key = (id(message), has_text)
    known = _STAND_INS.get(key)
    if known is not None and known[0] is message:
        return known[1]
    stand_in = replace(
        message.with_content(BREAK if has_text else ""),
        reasoning_content=BREAK if message.reasoning_content else message.reasoning_content,
    )
    _STAND_INS.put(key, (message, stand_in))
    return stand_in


def conversation_layout(
    *,
    tokenizer: Tokenizer,
    chat_format: str | ChatFormat,
    messages: Sequence[Mapping[str, Any] | Message] | None = None,
    system: str | None = None,
    question: str | None = None,
    thinking: bool = False,
    add_generation_prompt: bool = True,
    control_tokens: str = "neutralize",
    chat_settings: ChatSettings | None = None,
) -> ConversationLayout:
    """A :class:`ConversationLayout` from ``messages`` (one ``{context}``), or, without
    ``messages``, today's ``[system?, user(context + "\\n\\n" + question)]`` shape.

    ``chat_settings`` (tools, reasoning effort, ...) go to the named chat format
    (``thinking=`` is the older spelling of ``ChatSettings(thinking=...)``); a format
    object carries its own. Control tokens in message text are broken
    (``control_tokens="neutralize"``, listed in ``layout.neutralized``) or refused
    (``"refuse"``: ``ControlTokenError``); see :mod:`phaseaware.chat.untrusted` for
    the fields that are refused under every policy."""
    if messages is not None and system:
        raise InputError("pass the system prompt inside messages, or system= without messages")
    if system is not None:
        _check_text("system", system)
    if isinstance(chat_format, str):
        fmt = get_chat_format(chat_format, tokenizer, thinking=thinking, settings=chat_settings)
    elif chat_settings is not None:
        raise InputError(
            "chat_settings go with a chat format name; a format object carries its own "
            "(get_chat_format(name, tokenizer, settings=...))"
        )
    else:
        fmt = chat_format
    template = (
        parse_conversation(messages) if messages is not None else simple_conversation(system=system)
    )
    scanner = scanner_for(tokenizer, markers=markers_of(fmt), policy=control_tokens)
    template, neutralized = clean_template(template, scanner)
    if isinstance(fmt, DeepSeekFormat | HFChatFormat):  # the formats that render tools
        check_settings_text(fmt.settings, scanner)
    return ConversationLayout(
        template,
        fmt,
        question=question,
        add_generation_prompt=add_generation_prompt,
        neutralized=neutralized,
        scanner=scanner,
    )


def _single_turn_format(layout: object) -> ChatFormat | None:
    """The chat format of ``layout`` if it is the single-turn conversation without a
    system prompt (``conversation_layout`` with neither ``messages`` nor ``system``),
    else ``None``. Such a layout gives the same text as its format with ``system=``
    per call; :func:`with_system` uses that."""
    if (
        isinstance(layout, ConversationLayout)
        and type(layout) is ConversationLayout
        and layout.add_generation_prompt
        and layout.template == simple_conversation(system=None)
    ):
        return layout.chat_format
    return None


def with_system(layout: PromptLayout, system: str | None) -> PromptLayout:
    """The single-turn ``layout`` with ``system`` as its system message (``layout`` itself
    when ``system`` is empty), for callers that hold the system prompt apart from the
    layout (calibration's ``ProbeSettings.system``). The text is the caller's own and is
    rendered as given. Raises ``InputError`` for any other layout with a system prompt."""
    if not system:
        return layout
    _check_text("system", system)
    fmt = _single_turn_format(layout)
    if fmt is None:
        raise InputError(
            f"layout {layout.name!r} is not the single-turn conversation, so it cannot take a "
            "system prompt apart from its messages; put the system text into its messages"
        )
    return ConversationLayout(simple_conversation(system=system), fmt)
