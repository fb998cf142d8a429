"""Conversations: exact placement inside any chat (messages, chat formats, layouts)."""

from __future__ import annotations

from phaseaware.chat.append import (
    AppendLayout,
    DeltaLayout,
    append_from_count,
    append_layout,
    sent_text,
)
from phaseaware.chat.errors import (
    DuplicateSlotError,
    MessageContentError,
    MessageError,
    MissingSlotError,
    PrefixRewriteError,
    SlotError,
    TemplateRewriteError,
    ToolResultError,
    UnknownRoleError,
)
from phaseaware.chat.formats import (
    CHAT_FORMAT_NAMES,
    ChatFormat,
    chat_format_names,
    get_chat_format,
    register_chat_format,
)
from phaseaware.chat.layout import (
    ConversationLayout,
    PromptLayout,
    RenderedPrompt,
    conversation_layout,
)
from phaseaware.chat.messages import (
    ConversationTemplate,
    Message,
    Placeholder,
    ToolCall,
    escape_placeholders,
    parse_conversation,
    parse_message,
    parse_messages,
    simple_conversation,
)
from phaseaware.chat.settings import (
    VLLM_DEFAULT_SETTINGS,
    ChatSettings,
    ChatSettingsError,
    UnsupportedSettingError,
)

__all__ = [
    "AppendLayout",
    "DeltaLayout",
    "append_from_count",
    "append_layout",
    "sent_text",
    "CHAT_FORMAT_NAMES",
    "ChatSettings",
    "ChatSettingsError",
    "UnsupportedSettingError",
    "VLLM_DEFAULT_SETTINGS",
    "ChatFormat",
    "ConversationLayout",
    "ConversationTemplate",
    "DuplicateSlotError",
    "Message",
    "MessageContentError",
    "MessageError",
    "MissingSlotError",
    "Placeholder",
    "PrefixRewriteError",
    "PromptLayout",
    "RenderedPrompt",
    "SlotError",
    "TemplateRewriteError",
    "ToolCall",
    "ToolResultError",
    "UnknownRoleError",
    "chat_format_names",
    "conversation_layout",
    "escape_placeholders",
    "get_chat_format",
    "parse_conversation",
    "parse_message",
    "parse_messages",
    "register_chat_format",
    "simple_conversation",
]
