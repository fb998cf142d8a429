"""Checks a chat format makes of a message list before rendering it: every tool
result answers a call, every role is one it renders."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Protocol

from phaseaware.chat.errors import ToolResultError, UnknownRoleError


class Message(Protocol):
    """What the checks read of a message (``messages.Message``)."""

    @property
    def role(self) -> str: ...

    @property
    def tool_calls(self) -> Sequence[object]: ...


__all__ = ["check_roles", "check_tool_results"]


def check_tool_results(messages: Sequence[Message], *, start: int = 0) -> None:
    """Each tool message answers a call of the assistant turn before it.

    Consecutive tool messages answer that turn's calls in order, at most one per
    call. Raises :class:`ToolResultError` naming the message. Formats whose
    encoders require this (``deepseek-v4``) call it before rendering. ``start``:
    check from that message on (one that is not a tool message, after messages
    checked before).
    """
    if start and messages[start].role == "tool":
        raise ValueError("start must be a message that is not a tool message")
    calls = 0  # calls of the current assistant turn not yet answered
    for i in range(start, len(messages)):
        message = messages[i]
        if message.role == "assistant":
            calls = len(message.tool_calls)
        elif message.role == "tool":
            if calls == 0:
                raise ToolResultError(
                    f"message {i} is a tool result, but no unanswered tool call precedes it; "
                    "put it after an assistant message with tool_calls, or send the text as "
                    'a "user" message'
                )
            calls -= 1
        else:
            calls = 0


def check_roles(
    messages: Sequence[Message], *, chat_format: str, roles: frozenset[str], start: int = 0
) -> None:
    """Raise :class:`UnknownRoleError` for a message whose role ``chat_format`` cannot render
    (``start``: from that message on)."""
    for i in range(start, len(messages)):
        message = messages[i]
        if message.role not in roles:
            hint = "system" if message.role == "developer" else "user"
            raise UnknownRoleError(
                f"message {i} has role {message.role!r}, which chat format {chat_format!r} "
                f"does not render; use role {hint}, or chat format deepseek-v4 or deepseek-v4.1"
            )
