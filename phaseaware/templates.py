"""Deprecated: the chat formats are the only prompt renderer (:mod:`phaseaware.chat`).

``get_layout(name, tokenizer, thinking=...)`` is now
``phaseaware.chat.conversation_layout(tokenizer=..., chat_format=name, thinking=...)``
(the single-turn conversation ``[system?, user(context + "\\n\\n" + question)]``;
pass ``system=`` there, not to ``render``). ``RenderedPrompt`` and ``PromptLayout``
live in :mod:`phaseaware.chat.layout`. Kept importable because ``get_layout`` was
public (``phaseaware.get_layout``, the README); to be removed in a later release.
"""

from __future__ import annotations

import warnings

from phaseaware.chat.formats import CHAT_FORMAT_NAMES
from phaseaware.chat.layout import ConversationLayout, PromptLayout, RenderedPrompt
from phaseaware.tokenizers.base import Tokenizer

__all__ = ["RenderedPrompt", "PromptLayout", "get_layout", "LAYOUT_NAMES"]

LAYOUT_NAMES = CHAT_FORMAT_NAMES


def get_layout(name: str, tokenizer: Tokenizer, *, thinking: bool = False) -> ConversationLayout:
    """Deprecated: ``conversation_layout(tokenizer=tokenizer, chat_format=name, thinking=...)``."""
    warnings.warn(
        "get_layout is deprecated; use phaseaware.chat.conversation_layout(tokenizer=..., "
        "chat_format=name, system=...) or pass chat_format=name to assemble",
        DeprecationWarning,
        stacklevel=2,
    )
    from phaseaware.chat.layout import conversation_layout

    return conversation_layout(tokenizer=tokenizer, chat_format=name, thinking=thinking)
