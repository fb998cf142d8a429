"""Append alignment groundwork: place context in ONE new message of a conversation
already sent, without changing a byte of what the server has cached.

Two forms:

- :func:`append_layout` takes the sent messages. Its layout renders the whole
  conversation (sent + new); every ``split`` confirms that the prefix starts
  with :func:`sent_text` (the exact text the server holds), so token positions
  measured on the full render are absolute positions in the conversation.
- :func:`append_from_count` takes only the sent prefix's token count (e.g.
  ``usage.prompt_tokens + usage.completion_tokens`` of the last call). Its layout
  renders the new message's text alone (``delta``); absolute position =
  ``offset_tokens`` + position in the delta. The delta is measured after two
  different stand-in histories and must be the same after both, and the
  tokenizer must not merge tokens across the boundary (checked on adversarial
  endings): formats whose new turn starts with a special token (``chatml``,
  ``deepseek-v4``) pass; ``none`` usually fails, since its ``"\\n\\n"`` merges
  with preceding punctuation.

When the prefix is stable (otherwise :class:`~phaseaware.chat.errors.PrefixRewriteError`):
``chatml`` and ``none`` always; ``deepseek-v4`` non-thinking after an assistant
message, thinking only with ``drop_thinking=False`` (see
:mod:`phaseaware.chat.deepseek_v4` for exactly which bytes change); ``hf``
whenever the template renders the sent conversation as a prefix (checked).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace
from typing import Any

from phaseaware.chat.deepseek_encoding import DeepSeekFormat
from phaseaware.chat.deepseek_recipe import DeepSeekRecipeFormat
from phaseaware.chat.errors import PrefixRewriteError
from phaseaware.chat.formats import ChatFormat, markers_of
from phaseaware.chat.hf import HFChatFormat
from phaseaware.chat.layout import ConversationLayout, RenderedPrompt
from phaseaware.chat.messages import (
    ConversationTemplate,
    Message,
    Part,
    ToolCall,
    parse_conversation,
    parse_message,
    parse_messages,
)
from phaseaware.chat.untrusted import (
    check_sent,
    check_settings_text,
    clean_template,
    frame_template,
)
from phaseaware.errors import InputError, TemplateError
from phaseaware.tokenizers.base import Tokenizer
from phaseaware.tokenizers.control import ControlScanner, Neutralized, scanner_for

__all__ = [
    "drops_sent_reasoning",
    "sent_text",
    "AppendLayout",
    "append_layout",
    "TailLayout",
    "DeltaLayout",
    "append_from_count",
]

# endings a real sent text may have, to catch BPE merges across the boundary
_BOUNDARY_ENDINGS = ("a", ".", "!\n", " ", "\n", "1", "é", "中", "<|im_end|>\n", "}")


def sent_text(*, sent: Sequence[Message], chat_format: ChatFormat) -> str:
    """The text the server holds for ``sent``: its render, with the generation prompt
    when the last message awaits a reply (not an assistant message)."""
    awaiting = sent[-1].role != "assistant"
    return chat_format.render(sent, add_generation_prompt=awaiting)


def drops_sent_reasoning(chat_format: ChatFormat) -> bool:
    """Whether ``chat_format`` re-renders text already sent by its own documented rule:
    DeepSeek thinking mode with ``drop_thinking`` drops earlier reasoning when a user or tool
    message arrives (``drop_thinking=False`` keeps it); recipe (SGLang) by its own rules."""
    if isinstance(chat_format, DeepSeekRecipeFormat):
        return chat_format.rewrites_sent
    if not isinstance(chat_format, DeepSeekFormat):
        return False
    return chat_format.thinking and chat_format.drop_thinking


def first_change(sent: str, full: str) -> int:
    """The first character at which ``full`` differs from ``sent`` (``len`` of the shorter
    when one is a prefix of the other)."""
    return next(
        (i for i, (a, b) in enumerate(zip(sent, full, strict=False)) if a != b),
        min(len(sent), len(full)),
    )


def _rewrite_error(chat_format: ChatFormat, sent: str, full: str, what: str) -> PrefixRewriteError:
    offset = first_change(sent, full)
    hint = "append after the assistant's reply, or resend the conversation unaligned"
    if drops_sent_reasoning(chat_format):
        hint = (
            f"{chat_format.name} thinking mode drops earlier reasoning when a user or tool "
            "message arrives; pass drop_thinking=False (the official encoder does so "
            "when tools are defined), or " + hint
        )
    return PrefixRewriteError(
        f"chat format {chat_format.name!r} rewrites the already-sent text when {what} is "
        f"appended (first change at character {offset}: sent {sent[offset : offset + 24]!r}, "
        f"now {full[offset : offset + 24]!r}); the server's prefix cache would miss; {hint}",
        char_offset=offset,
    )


class AppendLayout(ConversationLayout):
    """The whole conversation; ``split`` checks the prefix starts with ``sent_text``
    (``strict=False``: the format's own drop rule may rewrite it; :meth:`rewritten_at`
    says where)."""

    def __init__(
        self, template: ConversationTemplate, chat_format: ChatFormat, *, sent_text: str,
        question: str | None = None, neutralized: tuple[Neutralized, ...] = (),
        strict: bool = True,
        scanner: ControlScanner | None = None,
    ) -> None:  # fmt: skip
        super().__init__(
            template, chat_format, question=question, neutralized=neutralized, scanner=scanner
        )
        self.sent_text = sent_text
        self.strict = strict
        self._kept: object = None  # the last prefix found to start with the sent text

    def keeps_sent(self, prefix: str) -> bool:
        """Whether a split's ``prefix`` starts with the sent text (once per prefix object)."""
        if prefix is self._kept:
            return True
        if prefix.startswith(self.sent_text):
            self._kept = prefix
            return True
        return False

    def rewritten_at(self, question: str) -> int | None:
        """The first character of the sent text this conversation's render changes
        (``None``: it keeps every byte)."""
        prefix, suffix = super().split(system=None, question=question)
        if prefix.startswith(self.sent_text):
            return None
        return first_change(self.sent_text, prefix + suffix)

    def split(self, *, system: str | None, question: str) -> tuple[str, str]:
        prefix, suffix = super().split(system=system, question=question)
        if self.strict and not self.keeps_sent(prefix):
            raise _rewrite_error(
                self.chat_format, self.sent_text, prefix + suffix, "the new message"
            )
        return prefix, suffix


class TailLayout:
    """An :class:`AppendLayout` from character ``start`` on (the tail re-tokenized alone).

    ``render(...).text`` is the whole render's ``text[start:]`` (char offsets index
    into the tail); ``messages`` is the whole conversation. ``start`` must be a
    cut of the sent text (``retokenize.prefix.prefix_cut``), so the tail's tokens
    are the whole prompt's from there. Each ``split`` and the last ``render`` are
    memoised: the render of the whole conversation is string work proportional to
    its length.
    """

    def __init__(self, inner: AppendLayout, start: int) -> None:
        if not 0 <= start <= len(inner.sent_text):
            raise InputError(f"start {start} outside the sent text of {len(inner.sent_text)}")
        self.inner = inner
        self.start = start
        self._splits: dict[tuple[str | None, str], tuple[str, str]] = {}
        self._last: tuple[tuple[str | None, str, str], RenderedPrompt] | None = None

    @property
    def name(self) -> str:
        return self.inner.name

    def neutralized_for(self, question: str) -> tuple[Neutralized, ...]:
        """The inner layout's (the new message's control strings and joins)."""
        return self.inner.neutralized_for(question)

    def split(self, *, system: str | None, question: str) -> tuple[str, str]:
        key = (system, question)
        if key not in self._splits:
            prefix, suffix = self.inner.split(system=system, question=question)
            self._splits[key] = (prefix[self.start :], suffix)
        return self._splits[key]

    def render(self, *, system: str | None, context: str, question: str) -> RenderedPrompt:
        key = (system, context, question)
        if self._last is not None and self._last[0] == key:  # verified, then confirmed
            return self._last[1]
        rendered = self._render(system=system, context=context, question=question)
        self._last = (key, rendered)
        return rendered

    def _render(self, *, system: str | None, context: str, question: str) -> RenderedPrompt:
        whole = self.inner.render(system=system, context=context, question=question)
        # the render is the split's prefix + context + suffix (checked): a prefix that
        # keeps the sent text answers for the whole text
        prefix = self.inner.split(system=system, question=question)[0]
        if not self.inner.keeps_sent(prefix) and not whole.text.startswith(self.inner.sent_text):
            raise _rewrite_error(
                self.inner.chat_format, self.inner.sent_text, whole.text, "the new message"
            )
        return RenderedPrompt(
            text=whole.text[self.start :],
            context_start=whole.context_start - self.start,
            context_end=whole.context_end - self.start,
            messages=whole.messages,
        )


def _new_message_parts(new: Mapping[str, Any] | Message, index: int) -> tuple[Message, list[Part]]:
    template = parse_conversation([parse_message(new, index=index)])
    return template.messages[0], list(template.parts[0])


def append_layout(
    *,
    sent: Sequence[Mapping[str, Any] | Message],
    new: Mapping[str, Any] | Message,
    chat_format: ChatFormat,
    question: str | None = None,
    tokenizer: Tokenizer | None = None,
    control_tokens: str = "neutralize",
    strict: bool = True,
) -> AppendLayout:
    """A layout over ``sent + [new]`` whose prefix starts with the sent text, byte for byte.

    ``sent`` is taken verbatim (no placeholders); ``new`` holds the one ``{context}``
    and any ``{question}``. Raises :class:`PrefixRewriteError` where the format
    would change bytes already sent (checked now with ``question`` or ``""``,
    and again on every ``split``); with ``strict=False`` it does not where the change
    is the format's own drop rule (:func:`drops_sent_reasoning`). With ``tokenizer``, message text is untrusted
    (:mod:`phaseaware.chat.untrusted`): control strings in ``new`` are broken
    (``control_tokens="neutralize"``) or refused, and any in ``sent`` are refused.
    """
    sent_messages = parse_messages(sent)
    message, parts = _new_message_parts(new, len(sent_messages))
    neutralized: tuple[Neutralized, ...] = ()
    scanner = None
    if tokenizer is not None:
        message, parts, neutralized, scanner = _clean_new(
            message, parts, chat_format, tokenizer, control_tokens, sent=sent_messages
        )
    template = ConversationTemplate.from_parts(
        [*sent_messages, message], [*([m.content] for m in sent_messages), parts]
    )
    layout = AppendLayout(
        template,
        chat_format,
        sent_text=sent_text(sent=sent_messages, chat_format=chat_format),
        question=question,
        neutralized=neutralized,
        strict=strict or not drops_sent_reasoning(chat_format),
        scanner=scanner,
    )
    layout.split(system=None, question=question or "")
    return layout


def _clean_new(
    message: Message,
    parts: list[Part],
    chat_format: ChatFormat,
    tokenizer: Tokenizer,
    policy: str,
    *,
    sent: Sequence[Message],
) -> tuple[Message, list[Part], tuple[Neutralized, ...], ControlScanner]:
    """The new message with its control strings broken (sent ones refused), and the scanner."""
    scanner = scanner_for(tokenizer, markers=markers_of(chat_format), policy=policy)
    check_sent(sent, scanner)
    if isinstance(chat_format, DeepSeekFormat | HFChatFormat):  # they render tools
        check_settings_text(chat_format.settings, scanner)
    template, found = clean_template(ConversationTemplate.from_parts([message], [parts]), scanner)
    # report offsets against the whole conversation's message index
    found = tuple(
        replace(h, where=h.where.replace("messages[0]", f"messages[{len(sent)}]", 1)) for h in found
    )
    return template.messages[0], list(template.parts[0]), found, scanner


def _stand_ins(new: Message, thinking: bool) -> tuple[tuple[Message, ...], ...]:
    """Two unlike histories ending in an assistant message that answers ``new``."""
    reasoning = "weighing it" if thinking else None
    calls = (ToolCall(name="lookup", arguments="{}", id=new.tool_call_id),)
    tool_calls = calls if new.role == "tool" else ()
    short = (
        Message(role="user", content="a"),
        Message(role="assistant", content="b.", tool_calls=tool_calls, reasoning_content=reasoning),
    )
    long = (
        Message(role="system", content="Be brief."),
        Message(role="user", content="What is x?\n"),
        Message(role="assistant", content=" x is 1!", reasoning_content=reasoning),
        Message(role="user", content="and y"),
        Message(role="assistant", content="", tool_calls=tool_calls, reasoning_content=reasoning),
    )
    return short, long


@dataclass(frozen=True)
class DeltaLayout:
    """The new message's text alone; absolute token = ``offset_tokens`` + delta token.

    ``render(...).messages`` is ``None``: a messages API needs the whole conversation.
    """

    chat_format: ChatFormat
    template: ConversationTemplate  # the new message alone
    offset_tokens: int
    tokenizer: Tokenizer
    neutralized: tuple[Neutralized, ...] = ()  # control strings broken in the new message
    scanner: ControlScanner | None = None  # cleans the new message again once filled

    @property
    def name(self) -> str:
        return self.chat_format.name

    def _framed(self, question: str) -> tuple[ConversationTemplate, tuple[Neutralized, ...]]:
        if self.scanner is None:
            return self.template, ()
        return frame_template(self.template, self.scanner, question=question)

    def neutralized_for(self, question: str) -> tuple[Neutralized, ...]:
        """``neutralized`` plus what was broken where ``question`` joins the message."""
        return self.neutralized + self._framed(question)[1]

    def filled(self, *, context: str, question: str) -> tuple[Message, ...]:
        """The new message with the slot holding ``context`` and ``{question}`` replaced."""
        return self._framed(question)[0].fill(context=context, question=question)

    def split(self, *, system: str | None, question: str) -> tuple[str, str]:
        if system:
            raise InputError("an appended message has no system prompt; pass system=None")
        new = self.template.messages[0]
        deltas = set()
        thinking = isinstance(self.chat_format, DeepSeekFormat | HFChatFormat) and (
            self.chat_format.thinking
        )
        for history in _stand_ins(new, thinking):
            sent = sent_text(sent=history, chat_format=self.chat_format)
            stand_in = ConversationTemplate.from_parts(
                [*history, new], [*([m.content] for m in history), self.template.parts[0]]
            )
            probe = ConversationLayout(stand_in, self.chat_format, scanner=self.scanner)
            prefix, suffix = probe.split(system=None, question=question)
            if not prefix.startswith(sent):
                raise _rewrite_error(self.chat_format, sent, prefix + suffix, "a message")
            deltas.add((prefix[len(sent) :], suffix))
        if len(deltas) != 1:
            raise TemplateError(
                f"chat format {self.name!r} renders the new message differently after "
                "different histories; pass the sent messages (append_layout) instead of a count"
            )
        delta_prefix, delta_suffix = deltas.pop()
        self._check_boundary(delta_prefix + "x" + delta_suffix)
        return delta_prefix, delta_suffix

    def _check_boundary(self, delta: str) -> None:
        ids = self.tokenizer.encode(delta)
        for ending in _BOUNDARY_ENDINGS:
            if self.tokenizer.encode(ending + delta) != self.tokenizer.encode(ending) + ids:
                raise TemplateError(
                    f"with tokenizer {self.tokenizer.spec!r} the new message's first token "
                    f"merges with a sent text ending in {ending!r} (chat format {self.name!r}), "
                    "so positions cannot come from a token count; pass the sent messages "
                    "(append_layout)"
                )

    def render(self, *, system: str | None, context: str, question: str) -> RenderedPrompt:
        if not isinstance(context, str):
            raise InputError(f"context must be a string, got {type(context).__name__}")
        prefix, suffix = self.split(system=system, question=question)
        return RenderedPrompt(
            text=prefix + context + suffix,
            context_start=len(prefix),
            context_end=len(prefix) + len(context),
            messages=None,
        )


def append_from_count(
    *,
    prefix_tokens: int,
    new: Mapping[str, Any] | Message,
    chat_format: ChatFormat,
    tokenizer: Tokenizer,
    control_tokens: str = "neutralize",
) -> DeltaLayout:
    """The cheap form: a layout of ``new`` alone after ``prefix_tokens`` sent tokens.

    The sent conversation must end with an assistant message (the reply that
    ``usage`` counted). Raises ``PrefixRewriteError``/``TemplateError`` where a
    count cannot give exact positions (see the module docstring).
    """
    if isinstance(prefix_tokens, bool) or not isinstance(prefix_tokens, int) or prefix_tokens < 1:
        raise InputError(f"prefix_tokens must be a positive int, got {prefix_tokens!r}")
    message, parts = _new_message_parts(new, 0)
    message, parts, neutralized, scanner = _clean_new(
        message, parts, chat_format, tokenizer, control_tokens, sent=()
    )
    layout = DeltaLayout(
        chat_format=chat_format,
        template=ConversationTemplate.from_parts([message], [parts]),
        offset_tokens=prefix_tokens,
        tokenizer=tokenizer,
        neutralized=neutralized,
        scanner=scanner,
    )
    layout.split(system=None, question="")
    return layout
