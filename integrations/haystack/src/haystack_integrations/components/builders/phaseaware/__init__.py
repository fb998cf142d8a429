"""phaseaware-haystack: a ``ChatPromptBuilder`` drop-in that places documents by position."""

from haystack_integrations.components.builders.phaseaware.chat_prompt_builder import (
    PhaseAwareChatPromptBuilder,
)

__all__ = ["PhaseAwareChatPromptBuilder"]
