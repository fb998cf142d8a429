"""Chat formats: a whole message list -> the exact prompt string the tokenizer sees.

Formats (``get_chat_format(name, tokenizer, thinking=...)``), the only prompt
renderer (the single-turn call is the ``[system?, user]`` conversation, see
:mod:`phaseaware.chat.layout`):

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

The formats are one table of :class:`ChatFormatEntry` (name -> factory, the
settings it renders, the markers it writes). The built-ins are registered with
:func:`register_chat_format`, the call a third party makes for its own format::

    register_chat_format("mine", lambda tokenizer, settings: MyFormat(settings.thinking),
                         supported_settings=("thinking",), markers=("<|mine|>",))
"""

from __future__ import annotations

import json
import threading
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Protocol, runtime_checkable

from phaseaware.chat import deepseek_v4, deepseek_v41
from phaseaware.chat.deepseek_recipe import DeepSeekRecipeFormat
from phaseaware.chat.deepseek_v4 import DeepSeekV4Format
from phaseaware.chat.deepseek_v41 import DeepSeekV41Format
from phaseaware.chat.hf import HFChatFormat
from phaseaware.chat.message_wise import MessageWiseFormat, render_after_kept
from phaseaware.chat.messages import COMMON_ROLES, Message
from phaseaware.chat.settings import (
    SETTING_NAMES,
    ChatSettings,
    ChatSettingsError,
    check_supported,
)
from phaseaware.errors import InputError, TemplateError
from phaseaware.tokenizers.base import Tokenizer

__all__ = [
    "CHAT_FORMAT_NAMES",
    "ChatFormat",
    "ChatFormatEntry",
    "PlainFormat",
    "ChatMLFormat",
    "MessageWiseFormat",
    "render_after_kept",
    "chat_format_entries",
    "chat_format_names",
    "get_chat_format",
    "register_chat_format",
    "format_markers",
    "format_settings",
    "markers_of",
    "DeclaredFormat",
    "CHATML_MARKERS",
]

IM_START = "<|im_start|>"
IM_END = "<|im_end|>"
#: ChatML's control strings, whether or not the vocabulary has them as tokens
CHATML_MARKERS: tuple[str, ...] = (IM_START, IM_END, "<|endoftext|>")


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
        """``BOS + "\\n\\n".join(contents)``, the messages after a remembered start
        only (:func:`render_after_kept`)."""
        return render_after_kept(self, messages, add_generation_prompt=add_generation_prompt)

    def opening(self) -> str:
        """The text before the first message (BOS)."""
        return self.bos_text

    def message_text(self, index: int, message: Message) -> str:
        """Message ``index``'s text: its content, after ``"\\n\\n"`` past the first."""
        return message.content if index == 0 else "\n\n" + message.content

    def closing(self, *, add_generation_prompt: bool) -> str:
        """Nothing: a plain completion has no generation prompt."""
        return ""

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
        """The ChatML turns, the messages after a remembered start only
        (:func:`render_after_kept`)."""
        return render_after_kept(self, messages, add_generation_prompt=add_generation_prompt)

    def opening(self) -> str:
        """The text before the first message (BOS)."""
        return self.bos_text

    def message_text(self, index: int, message: Message) -> str:
        """One turn: ``<|im_start|>role\\nbody<|im_end|>\\n`` (body: content, then any
        tool calls after ``"\\n"``)."""
        body = message.content
        if message.tool_calls:  # the separator never depends on the text (the slot's)
            body += "\n" + hermes_tool_calls(message)
        return f"{IM_START}{message.role}\n{body}{IM_END}\n"

    def closing(self, *, add_generation_prompt: bool) -> str:
        """The open assistant turn, with ``add_generation_prompt``."""
        return f"{IM_START}assistant\n" if add_generation_prompt else ""

    def __repr__(self) -> str:
        return f"ChatMLFormat(bos_text={self.bos_text!r})"


#: ``factory(tokenizer, settings)``: ``settings`` hold only what the format declared.
ChatFormatFactory = Callable[[Tokenizer, ChatSettings], ChatFormat]


@dataclass(frozen=True)
class ChatFormatEntry:
    """One chat format: its factory, the settings it renders and the markers it writes.

    ``supported_settings`` are :data:`~phaseaware.chat.settings.SETTING_NAMES`;
    ``markers`` are the control strings the format writes (:func:`format_markers`).
    """

    name: str
    factory: ChatFormatFactory
    supported_settings: frozenset[str] = frozenset()
    markers: tuple[str, ...] = ()


_lock = threading.Lock()
_entries: dict[str, ChatFormatEntry] = {}


def register_chat_format(
    name: str,
    factory: ChatFormatFactory,
    *,
    supported_settings: Sequence[str] | frozenset[str] = (),
    markers: Sequence[str] = (),
    replace: bool = False,
) -> ChatFormatEntry:
    """Make ``name`` a chat format: ``factory(tokenizer, settings)`` builds it.

    ``supported_settings``: which :class:`~phaseaware.chat.settings.ChatSettings`
    the format renders (a caller giving another one gets ``UnsupportedSettingError``
    before the factory runs). ``markers``: the control strings it writes, broken
    in message text. A name registered already is an ``InputError`` unless ``replace``.
    """
    if not isinstance(name, str) or not name or name != name.strip():
        raise InputError(f"a chat format name is a non-empty string, got {name!r}")
    settings = frozenset(supported_settings)
    unknown = sorted(settings - set(SETTING_NAMES))
    if unknown or not callable(factory):
        raise InputError(
            f"register_chat_format({name!r}) needs a callable factory and settings from "
            f"{', '.join(SETTING_NAMES)}; got supported_settings {sorted(settings)!r}"
        )
    if isinstance(markers, str) or not all(isinstance(m, str) and m for m in markers):
        raise InputError(
            f"register_chat_format({name!r}): markers are a list of non-empty strings, "
            f"got {markers!r}"
        )
    entry = ChatFormatEntry(
        name=name, factory=factory, supported_settings=settings, markers=tuple(markers)
    )
    with _lock:
        if name in _entries and not replace:
            raise InputError(
                f"chat format {name!r} is registered already; pass replace=True to replace it"
            )
        _entries[name] = entry
    return entry


def chat_format_entries() -> tuple[ChatFormatEntry, ...]:
    """Every registered chat format, in registration order (built-ins first)."""
    with _lock:
        return tuple(_entries.values())


def chat_format_names() -> tuple[str, ...]:
    """The names ``get_chat_format`` accepts now (built-ins and registered ones)."""
    return tuple(e.name for e in chat_format_entries())


def format_markers(name: str) -> tuple[str, ...]:
    """The control strings chat format ``name`` writes (``()`` for an unknown name: the
    tokenizer's special strings are scanned regardless)."""
    with _lock:
        entry = _entries.get(name) if isinstance(name, str) else None
    return entry.markers if entry is not None else ()


def format_settings(name: str) -> frozenset[str]:
    """The settings chat format ``name`` renders (empty for an unknown name)."""
    with _lock:
        entry = _entries.get(name) if isinstance(name, str) else None
    return entry.supported_settings if entry is not None else frozenset()


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
    """The chat format ``name`` (see :func:`chat_format_names`) for ``tokenizer``.

    ``settings`` holds what the rendering depends on besides the messages
    (:class:`~phaseaware.chat.settings.ChatSettings`); a format refuses settings it
    does not declare (:class:`~phaseaware.chat.settings.UnsupportedSettingError`).
    ``thinking``/``drop_thinking`` are the older spelling of the same settings
    (``drop_thinking=True`` is the encoder's rule, ``False`` keeps all reasoning).
    """
    chosen = _settings(settings, thinking=thinking, drop_thinking=drop_thinking)
    with _lock:
        entry = _entries.get(name) if isinstance(name, str) else None
    if entry is None:
        raise TemplateError(
            f"unknown chat format {name!r}; use one of {', '.join(chat_format_names())} "
            "(chat_format= / --chat-format)"
        )
    check_supported(chosen, chat_format=name, supported=entry.supported_settings)
    return entry.factory(tokenizer, chosen)


def _register_built_ins() -> None:
    # thinking is accepted by none/chatml and has no effect there (no thinking markers)
    register_chat_format(
        "none",
        lambda tokenizer, _: PlainFormat(bos_text=tokenizer.bos_text),
        supported_settings=PlainFormat.supported_settings,
        markers=PlainFormat.markers,
    )
    register_chat_format(
        "chatml",
        lambda tokenizer, _: ChatMLFormat(bos_text=tokenizer.bos_text),
        supported_settings=ChatMLFormat.supported_settings,
        markers=CHATML_MARKERS,
    )
    register_chat_format(
        "hf",
        lambda tokenizer, settings: HFChatFormat(
            tokenizer,
            thinking=settings.thinking,
            tools=settings.tools,
            tool_arguments=settings.tool_arguments,
        ),
        supported_settings=HFChatFormat.supported_settings,
        markers=HFChatFormat.markers,  # the tokenizer's special strings cover a template's
    )
    register_chat_format("deepseek-v4", lambda _, settings: _deepseek("deepseek-v4", settings),
                         supported_settings=DeepSeekV4Format.supported_settings,
                         markers=deepseek_v4.MARKERS)  # fmt: skip
    register_chat_format("deepseek-v4.1", lambda _, settings: _deepseek("deepseek-v4.1", settings),
                         supported_settings=DeepSeekV41Format.supported_settings,
                         markers=deepseek_v41.MARKERS)  # fmt: skip


def _deepseek(name: str, settings: ChatSettings) -> ChatFormat:
    """The DeepSeek format for the target's renderer: the encoder file as vLLM wraps it,
    or DeepSeek's reference encoder as SGLang drives it (``settings.renderer``)."""
    if settings.renderer == "sglang":
        return DeepSeekRecipeFormat(chat_format=name, settings=settings)
    if name == "deepseek-v4":
        return DeepSeekV4Format(settings=settings)
    return DeepSeekV41Format(settings=settings)


_register_built_ins()

#: The built-in chat formats (``chat_format_names()`` lists registered ones too).
CHAT_FORMAT_NAMES = chat_format_names()
