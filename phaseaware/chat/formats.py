"""Chat formats: a whole message list -> the exact prompt string the tokenizer sees.

Formats (``get_chat_format(name, tokenizer, thinking=...)``), each agreeing with
the layout of the same name in :mod:`phaseaware.templates` on the
``[system?, user]`` shape:

- ``none``: a plain completion, ``BOS + "\\n\\n".join(contents)``. Every message
  contributes its content (an empty one still adds its separator); roles, tool
  calls and reasoning are not written.
- ``chatml``: ``BOS + <|im_start|>role\\ncontent<|im_end|>\\n`` per message, then
  ``<|im_start|>assistant\\n`` with ``add_generation_prompt``. Tool messages are
  turns of role ``tool``; an assistant's tool calls follow its content and a
  ``"\\n"`` (also when the content is empty: the layout never depends on the
  text) as Hermes-style blocks, one per line, as Qwen2.5 writes them:
  ``<tool_call>\\n{"name": ..., "arguments": {...}}\\n</tool_call>``. Reasoning
  is not written; ``thinking`` has no effect.
- ``hf``: the tokenizer's own Jinja template (:mod:`phaseaware.chat.hf`).
- ``deepseek-v4``: DeepSeek's official V4 encoding (:mod:`phaseaware.chat.deepseek_v4`).
- ``deepseek-v4.1``: the V4.1 encoding (:mod:`phaseaware.chat.deepseek_v41`).

Each format declares ``supported_settings`` (the
:class:`~phaseaware.chat.settings.ChatSettings` it renders; others are refused),
``supported_roles`` and ``markers`` (the control strings it writes, which
:func:`format_markers` hands to the control-token scanner).

Every format keeps message text verbatim (``hf`` checks it), so the text around
a placeholder inside a message is a fixed prefix and suffix.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import Protocol, runtime_checkable

from phaseaware.chat import deepseek_v4, deepseek_v41
from phaseaware.chat.deepseek_v4 import DeepSeekV4Format
from phaseaware.chat.deepseek_v41 import DeepSeekV41Format
from phaseaware.chat.hf import HFChatFormat
from phaseaware.chat.messages import COMMON_ROLES, Message, check_roles
from phaseaware.chat.settings import ChatSettings, ChatSettingsError, check_supported
from phaseaware.errors import TemplateError
from phaseaware.tokenizers.base import Tokenizer

__all__ = [
    "CHAT_FORMAT_NAMES",
    "ChatFormat",
    "PlainFormat",
    "ChatMLFormat",
    "get_chat_format",
    "format_markers",
    "markers_of",
    "DeclaredFormat",
    "CHATML_MARKERS",
]

IM_START = "<|im_start|>"
IM_END = "<|im_end|>"
#: ChatML's control strings, whether or not the vocabulary has them as tokens
CHATML_MARKERS: tuple[str, ...] = (IM_START, IM_END, "<|endoftext|>")

CHAT_FORMAT_NAMES = ("none", "chatml", "hf", "deepseek-v4", "deepseek-v4.1")


@runtime_checkable
class ChatFormat(Protocol):
    """Renders a conversation; ``chat`` is False for plain completions (no messages API)."""

    @property
    def name(self) -> str: ...

    @property
    def chat(self) -> bool: ...

    def render(self, messages: Sequence[Message], *, add_generation_prompt: bool = True) -> str:
        """The prompt text of ``messages`` (BOS and markers included)."""
        ...


@runtime_checkable
class DeclaredFormat(ChatFormat, Protocol):
    """A chat format that declares what it renders (every built-in one does)."""

    @property
    def supported_settings(self) -> frozenset[str]:
        """Names of the :class:`~phaseaware.chat.settings.ChatSettings` it renders."""
        ...

    @property
    def supported_roles(self) -> frozenset[str]:
        """Message roles it renders (others: ``UnknownRoleError``)."""
        ...

    @property
    def markers(self) -> tuple[str, ...]:
        """Control strings the format writes (broken in message text before rendering)."""
        ...


def markers_of(chat_format: ChatFormat) -> tuple[str, ...]:
    """The control strings ``chat_format`` writes: declared, or by its name."""
    if isinstance(chat_format, DeclaredFormat):
        return tuple(chat_format.markers)
    return format_markers(chat_format.name)


class PlainFormat:
    """``BOS + "\\n\\n".join(message contents)``; no chat markers."""

    name = "none"
    chat = False
    supported_settings = frozenset({"thinking"})  # accepted, no effect (no chat markers)
    supported_roles = COMMON_ROLES
    markers: tuple[str, ...] = ()

    def __init__(self, *, bos_text: str) -> None:
        self.bos_text = bos_text

    def render(self, messages: Sequence[Message], *, add_generation_prompt: bool = True) -> str:
        check_roles(messages, chat_format=self.name, roles=self.supported_roles)
        return self.bos_text + "\n\n".join(m.content for m in messages)

    def __repr__(self) -> str:
        return f"PlainFormat(bos_text={self.bos_text!r})"


def hermes_tool_calls(message: Message) -> str:
    """An assistant's tool calls as ``<tool_call>`` JSON blocks (``""`` without calls)."""
    blocks = [
        "<tool_call>\n"
        + json.dumps({"name": c.name, "arguments": c.parsed_arguments()}, ensure_ascii=False)
        + "\n</tool_call>"
        for c in message.tool_calls
    ]
    return "\n".join(blocks)


class ChatMLFormat:
    """ChatML turns after the tokenizer's BOS (see the module docstring)."""

    name = "chatml"
    chat = True
    supported_settings = frozenset({"thinking"})  # accepted, no effect
    supported_roles = COMMON_ROLES
    markers = CHATML_MARKERS

    def __init__(self, *, bos_text: str) -> None:
        self.bos_text = bos_text

    def render(self, messages: Sequence[Message], *, add_generation_prompt: bool = True) -> str:
        check_roles(messages, chat_format=self.name, roles=self.supported_roles)
        parts = [self.bos_text]
        for message in messages:
            body = message.content
            if message.tool_calls:  # the separator never depends on the text (the slot's)
                body += "\n" + hermes_tool_calls(message)
            parts.append(f"{IM_START}{message.role}\n{body}{IM_END}\n")
        if add_generation_prompt:
            parts.append(f"{IM_START}assistant\n")
        return "".join(parts)

    def __repr__(self) -> str:
        return f"ChatMLFormat(bos_text={self.bos_text!r})"


_MARKERS: dict[str, tuple[str, ...]] = {
    "none": PlainFormat.markers,
    "chatml": CHATML_MARKERS,
    "hf": (),  # the tokenizer's own special strings cover a Jinja template's markers
    "deepseek-v4": deepseek_v4.MARKERS,
    "deepseek-v4.1": deepseek_v41.MARKERS,
}


def format_markers(name: str) -> tuple[str, ...]:
    """The control strings chat format ``name`` writes (``()`` for an unknown name: the
    tokenizer's special strings are scanned regardless)."""
    return _MARKERS.get(name, ())


def _settings(
    settings: ChatSettings | None, *, thinking: bool, drop_thinking: bool
) -> ChatSettings:
    if settings is None:
        return ChatSettings(thinking=thinking, drop_thinking=None if drop_thinking else False)
    if not isinstance(settings, ChatSettings):
        raise ChatSettingsError(
            f"settings must be a ChatSettings, got {type(settings).__name__}; build one with "
            "ChatSettings(thinking=..., tools=...)"
        )
    if thinking or not drop_thinking:
        raise ChatSettingsError(
            "pass thinking/drop_thinking inside settings=ChatSettings(...), not beside it"
        )
    return settings


def get_chat_format(
    name: str,
    tokenizer: Tokenizer,
    *,
    thinking: bool = False,
    drop_thinking: bool = True,
    settings: ChatSettings | None = None,
) -> ChatFormat:
    """The chat format ``name`` (one of :data:`CHAT_FORMAT_NAMES`) for ``tokenizer``.

    ``settings`` holds what the rendering depends on besides the messages
    (:class:`~phaseaware.chat.settings.ChatSettings`); a format refuses settings it
    does not render (:class:`~phaseaware.chat.settings.UnsupportedSettingError`).
    ``thinking``/``drop_thinking`` are the older spelling of the same settings
    (``drop_thinking=True`` is the encoder's rule, ``False`` keeps all reasoning).
    """
    chosen = _settings(settings, thinking=thinking, drop_thinking=drop_thinking)
    fmt: ChatFormat
    if name == "none":
        fmt = PlainFormat(bos_text=tokenizer.bos_text)
    elif name == "chatml":
        fmt = ChatMLFormat(bos_text=tokenizer.bos_text)
    elif name == "hf":
        check_supported(chosen, chat_format=name, supported=HFChatFormat.supported_settings)
        return HFChatFormat(tokenizer, thinking=chosen.thinking)
    elif name == "deepseek-v4":
        return DeepSeekV4Format(settings=chosen)
    elif name == "deepseek-v4.1":
        return DeepSeekV41Format(settings=chosen)
    else:
        raise TemplateError(
            f"unknown chat format {name!r}; use one of {', '.join(CHAT_FORMAT_NAMES)} "
            "(chat_format=)"
        )
    check_supported(chosen, chat_format=name, supported=fmt.supported_settings)
    return fmt
