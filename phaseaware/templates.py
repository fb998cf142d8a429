"""Prompt templates (layouts): what comes before and after the retrieved context.

A layout turns ``(system, context, question)`` into the exact prompt string the
tokenizer sees (BOS and template markers included). Because BPE merges across
boundaries, callers never add token counts of parts; they render and
re-tokenize. ``split`` gives the fixed prefix and suffix strings around the
context so planners can reason about positions.

Invariant of every layout::

    prefix, suffix = layout.split(system=s, question=q)
    layout.render(system=s, context=c, question=q).text == prefix + c + suffix

and ``context_start == len(prefix)``, ``context_end == len(prefix) + len(c)``
(character offsets). ``system=None`` or ``""`` means "no system prompt".

Layouts (``get_layout(name, tokenizer, thinking=...)``):

- ``none``: a plain completion prompt, ``BOS + [system + "\\n\\n"] + context +
  "\\n\\n" + question``. The text already holds the BOS token, so a completion
  endpoint that adds BOS itself must be sent the text without ``tokenizer.bos_text``.
- ``chatml``: ``<|im_start|>role\\n...<|im_end|>\\n`` turns, ending with the open
  assistant turn, after the tokenizer's BOS if it has one.
- ``hf``: the tokenizer's own chat template (``apply_chat_template``).
- ``deepseek-v4``: ``<｜begin▁of▁sentence｜>{system}<｜User｜>{user}<｜Assistant｜>``
  then ``</think>`` (non-thinking) or ``<think>`` (``thinking=True``).

For chat layouts ``messages`` holds the chat messages (system optional, then
user, whose content is ``context + "\\n\\n" + question``) for APIs that take
messages instead of text; ``none`` has ``messages=None``.
"""

from __future__ import annotations

import functools
import uuid
from dataclasses import dataclass
from typing import Any, Protocol, runtime_checkable

from phaseaware.errors import InputError, TemplateError
from phaseaware.tokenizers.base import ChatTemplateTokenizer, Tokenizer
from phaseaware.tokenizers.registry import DEEPSEEK_V4_BOS

__all__ = [
    "RenderedPrompt",
    "PromptLayout",
    "get_layout",
    "LAYOUT_NAMES",
    "PlainLayout",
    "ChatMLLayout",
    "HFTemplateLayout",
    "DeepSeekV4Layout",
]

LAYOUT_NAMES = ("none", "chatml", "hf", "deepseek-v4")
CONTEXT_QUESTION_SEPARATOR = "\n\n"


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


def _check_text(name: str, value: object, *, optional: bool = False) -> None:
    if optional and value is None:
        return
    if not isinstance(value, str):
        raise InputError(f"{name} must be a string, got {type(value).__name__}")


def _messages(system: str | None, user: str) -> tuple[dict[str, str], ...]:
    turns = [{"role": "system", "content": system}] if system else []
    return (*turns, {"role": "user", "content": user})


class _SplitLayout:
    """Base: ``render`` is ``split`` around the context, plus the messages."""

    name = ""
    chat = True

    def split(self, *, system: str | None, question: str) -> tuple[str, str]:
        raise NotImplementedError

    def render(self, *, system: str | None, context: str, question: str) -> RenderedPrompt:
        _check_text("context", context)
        prefix, suffix = self.split(system=system, question=question)
        messages = (
            _messages(system, context + CONTEXT_QUESTION_SEPARATOR + question)
            if self.chat
            else None
        )
        return RenderedPrompt(
            text=prefix + context + suffix,
            context_start=len(prefix),
            context_end=len(prefix) + len(context),
            messages=messages,
        )

    def __repr__(self) -> str:
        return f"{type(self).__name__}(name={self.name!r})"


class PlainLayout(_SplitLayout):
    """``BOS + [system + "\\n\\n"] + context + "\\n\\n" + question`` (no chat markers)."""

    name = "none"
    chat = False

    def __init__(self, *, bos_text: str) -> None:
        self.bos_text = bos_text

    def split(self, *, system: str | None, question: str) -> tuple[str, str]:
        _check_text("system", system, optional=True)
        _check_text("question", question)
        prefix = self.bos_text + (system + "\n\n" if system else "")
        return prefix, CONTEXT_QUESTION_SEPARATOR + question


class ChatMLLayout(_SplitLayout):
    """ChatML turns (``<|im_start|>role\\n...<|im_end|>\\n``) after the tokenizer's BOS."""

    name = "chatml"

    def __init__(self, *, bos_text: str) -> None:
        self.bos_text = bos_text

    def split(self, *, system: str | None, question: str) -> tuple[str, str]:
        _check_text("system", system, optional=True)
        _check_text("question", question)
        prefix = self.bos_text
        if system:
            prefix += f"<|im_start|>system\n{system}<|im_end|>\n"
        prefix += "<|im_start|>user\n"
        suffix = f"\n\n{question}<|im_end|>\n<|im_start|>assistant\n"
        return prefix, suffix


class DeepSeekV4Layout(_SplitLayout):
    """DeepSeek-V4 chat format (from its public description; it ships no Jinja template)."""

    name = "deepseek-v4"
    BOS = DEEPSEEK_V4_BOS
    USER = "<｜User｜>"
    ASSISTANT = "<｜Assistant｜>"
    THINK_OPEN = "<think>"
    THINK_CLOSE = "</think>"

    def __init__(self, *, thinking: bool = False) -> None:
        self.thinking = thinking

    def split(self, *, system: str | None, question: str) -> tuple[str, str]:
        _check_text("system", system, optional=True)
        _check_text("question", question)
        prefix = self.BOS + (system or "") + self.USER
        opener = self.THINK_OPEN if self.thinking else self.THINK_CLOSE
        return prefix, CONTEXT_QUESTION_SEPARATOR + question + self.ASSISTANT + opener


class HFTemplateLayout(_SplitLayout):
    """The tokenizer's own chat template, split around a unique sentinel context."""

    name = "hf"

    def __init__(
        self, tokenizer: Tokenizer | ChatTemplateTokenizer, *, thinking: bool = False
    ) -> None:
        spec = tokenizer.spec
        if not isinstance(tokenizer, ChatTemplateTokenizer) or tokenizer.chat_template is None:
            raise TemplateError(
                f"tokenizer {spec!r} has no chat template; "
                "use --layout chatml, deepseek-v4 or none, or an hf: tokenizer with a template"
            )
        self._spec = spec
        self._tokenizer: ChatTemplateTokenizer = tokenizer
        self.thinking = thinking
        # one template render per (system, question), not per context
        self._split_cached = functools.lru_cache(maxsize=64)(self._split_uncached)

    def _render_messages(self, messages: tuple[dict[str, str], ...]) -> str:
        # both names are in use (Qwen3: enable_thinking; DeepSeek V3.1: thinking)
        return self._tokenizer.render_chat(
            messages,
            add_generation_prompt=True,
            enable_thinking=self.thinking,
            thinking=self.thinking,
        )

    def split(self, *, system: str | None, question: str) -> tuple[str, str]:
        _check_text("system", system, optional=True)
        _check_text("question", question)
        return self._split_cached(system, question)

    def _split_uncached(self, system: str | None, question: str) -> tuple[str, str]:
        sentinel = f"PHASEAWARE_CONTEXT_{uuid.uuid4().hex}"
        text = self._render_messages(
            _messages(system, sentinel + CONTEXT_QUESTION_SEPARATOR + question)
        )
        if text.count(sentinel) != 1:
            raise TemplateError(
                f"chat template of {self._spec!r} repeats or drops the user message "
                f"({text.count(sentinel)} copies of the context); use --layout chatml or none"
            )
        prefix, suffix = text.split(sentinel)
        return prefix, suffix

    def render(self, *, system: str | None, context: str, question: str) -> RenderedPrompt:
        rendered = super().render(system=system, context=context, question=question)
        assert rendered.messages is not None
        if self._render_messages(rendered.messages) != rendered.text:
            raise TemplateError(
                f"chat template of {self._spec!r} rewrites the user message (e.g. "
                "strips whitespace), so the context cannot be placed exactly; strip leading/"
                "trailing whitespace from context and question, or use --layout chatml"
            )
        return rendered


def get_layout(name: str, tokenizer: Tokenizer, *, thinking: bool = False) -> PromptLayout:
    """The layout ``name`` (one of :data:`LAYOUT_NAMES`) for ``tokenizer``.

    ``thinking`` selects the thinking variant where the format has one
    (``deepseek-v4``; passed to ``hf`` templates as ``enable_thinking``/``thinking``).
    """
    if name == "none":
        return PlainLayout(bos_text=tokenizer.bos_text)
    if name == "chatml":
        return ChatMLLayout(bos_text=tokenizer.bos_text)
    if name == "hf":
        return HFTemplateLayout(tokenizer, thinking=thinking)
    if name == "deepseek-v4":
        return DeepSeekV4Layout(thinking=thinking)
    raise TemplateError(f"unknown layout {name!r}; use one of {', '.join(LAYOUT_NAMES)} (--layout)")
