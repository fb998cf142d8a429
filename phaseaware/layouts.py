"""Moved to :mod:`phaseaware.templates`; this shim keeps the old import path working."""

from phaseaware.templates import (
    CONTEXT_QUESTION_SEPARATOR,
    LAYOUT_NAMES,
    ChatMLLayout,
    DeepSeekV4Layout,
    HFTemplateLayout,
    PlainLayout,
    PromptLayout,
    RenderedPrompt,
    get_layout,
)

__all__ = [
    "CONTEXT_QUESTION_SEPARATOR",
    "LAYOUT_NAMES",
    "ChatMLLayout",
    "DeepSeekV4Layout",
    "HFTemplateLayout",
    "PlainLayout",
    "PromptLayout",
    "RenderedPrompt",
    "get_layout",
]
