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

Every format keeps message text verbatim (``hf`` checks it), so the text around
a placeholder inside a message is a fixed prefix and suffix.

The formats are one table of :class:`ChatFormatEntry` (name -> factory + the
options it declares). The built-ins are registered with
:func:`register_chat_format`, the call a third party makes for its own format::

    register_chat_format("mine", lambda tokenizer, **options: MyFormat(**options),
                         options=("thinking",))
"""

from __future__ import annotations

import json
import threading
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any, Protocol, runtime_checkable

from phaseaware.chat.deepseek_v4 import DeepSeekV4Format
from phaseaware.chat.hf import HFChatFormat
from phaseaware.chat.messages import Message
from phaseaware.errors import InputError, TemplateError
from phaseaware.tokenizers.base import Tokenizer

__all__ = [
    "CHAT_FORMAT_NAMES",
    "ChatFormat",
    "ChatFormatEntry",
    "PlainFormat",
    "ChatMLFormat",
    "chat_format_entries",
    "chat_format_names",
    "get_chat_format",
    "register_chat_format",
]


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


class PlainFormat:
    """``BOS + "\\n\\n".join(message contents)``; no chat markers."""

    name = "none"
    chat = False

    def __init__(self, *, bos_text: str) -> None:
        self.bos_text = bos_text

    def render(self, messages: Sequence[Message], *, add_generation_prompt: bool = True) -> str:
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

    def __init__(self, *, bos_text: str) -> None:
        self.bos_text = bos_text

    def render(self, messages: Sequence[Message], *, add_generation_prompt: bool = True) -> str:
        parts = [self.bos_text]
        for message in messages:
            body = message.content
            if message.tool_calls:  # the separator never depends on the text (the slot's)
                body += "\n" + hermes_tool_calls(message)
            parts.append(f"<|im_start|>{message.role}\n{body}<|im_end|>\n")
        if add_generation_prompt:
            parts.append("<|im_start|>assistant\n")
        return "".join(parts)

    def __repr__(self) -> str:
        return f"ChatMLFormat(bos_text={self.bos_text!r})"


#: ``factory(tokenizer, **options)``: ``options`` are the declared ones the caller set.
ChatFormatFactory = Callable[..., ChatFormat]

#: Every option ``get_chat_format`` passes on, with its default.
OPTION_DEFAULTS: dict[str, Any] = {"thinking": False, "drop_thinking": True}


@dataclass(frozen=True)
class ChatFormatEntry:
    """One chat format: its factory and the options (``OPTION_DEFAULTS`` keys) it takes."""

    name: str
    factory: ChatFormatFactory
    options: tuple[str, ...] = ()


_lock = threading.Lock()
_entries: dict[str, ChatFormatEntry] = {}


def register_chat_format(
    name: str, factory: ChatFormatFactory, *, options: Sequence[str] = (), replace: bool = False
) -> ChatFormatEntry:
    """Make ``name`` a chat format: ``factory(tokenizer, **options)`` builds it.

    ``options``: which of ``thinking``/``drop_thinking`` the factory takes (the
    others are not passed: ``chatml`` has no thinking variant). A name registered
    already is an ``InputError`` unless ``replace``.
    """
    if not isinstance(name, str) or not name or name != name.strip():
        raise InputError(f"a chat format name is a non-empty string, got {name!r}")
    unknown = sorted(set(options) - OPTION_DEFAULTS.keys())
    if unknown or not callable(factory):
        raise InputError(
            f"register_chat_format({name!r}) needs a callable factory and options from "
            f"{', '.join(OPTION_DEFAULTS)}; got options {list(options)!r}"
        )
    entry = ChatFormatEntry(name=name, factory=factory, options=tuple(options))
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


def get_chat_format(
    name: str, tokenizer: Tokenizer, *, thinking: bool = False, drop_thinking: bool = True
) -> ChatFormat:
    """The chat format ``name`` (see :func:`chat_format_names`) for ``tokenizer``.

    ``thinking`` selects the thinking variant (``deepseek-v4``; passed to ``hf``
    templates as ``enable_thinking``/``thinking``). ``drop_thinking`` is the
    ``deepseek-v4`` encoder's option of the same name (see its module). A format
    gets only the options it declares.
    """
    with _lock:
        entry = _entries.get(name) if isinstance(name, str) else None
    if entry is None:
        raise TemplateError(
            f"unknown chat format {name!r}; use one of {', '.join(chat_format_names())} "
            "(chat_format= / --chat-format)"
        )
    given = {"thinking": thinking, "drop_thinking": drop_thinking}
    return entry.factory(tokenizer, **{k: given[k] for k in entry.options})


register_chat_format("none", lambda tokenizer: PlainFormat(bos_text=tokenizer.bos_text))
register_chat_format("chatml", lambda tokenizer: ChatMLFormat(bos_text=tokenizer.bos_text))
register_chat_format("hf", HFChatFormat, options=("thinking",))
register_chat_format("deepseek-v4", lambda _, **options: DeepSeekV4Format(**options),
                     options=("thinking", "drop_thinking"))  # fmt: skip

#: The built-in chat formats (``chat_format_names()`` lists registered ones too).
CHAT_FORMAT_NAMES = chat_format_names()
