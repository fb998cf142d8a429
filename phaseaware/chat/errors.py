"""Typed errors of conversations; every message names the fix.

They subclass the project hierarchy (:mod:`phaseaware.errors`), so callers that
catch ``InputError``/``TemplateError`` keep working; the CLI maps them as usual.
"""

from __future__ import annotations

from phaseaware.errors import InputError, TemplateError

__all__ = [
    "MessageError",
    "UnknownRoleError",
    "MessageContentError",
    "SlotError",
    "MissingSlotError",
    "DuplicateSlotError",
    "ToolResultError",
    "TemplateRewriteError",
    "PrefixRewriteError",
]


class MessageError(InputError):
    """A chat message cannot be used as given (its index is in the message)."""


class UnknownRoleError(MessageError):
    """A message has a role other than system, user, assistant or tool."""


class MessageContentError(MessageError):
    """A message's content (or another field) has the wrong type or shape."""


class SlotError(InputError):
    """The conversation does not hold exactly one ``{context}`` slot."""


class MissingSlotError(SlotError):
    """No message holds the ``{context}`` slot."""


class DuplicateSlotError(SlotError):
    """More than one ``{context}`` slot in the conversation."""


class ToolResultError(MessageError):
    """A tool message answers no tool call, where the chat format needs one."""


class TemplateRewriteError(TemplateError):
    """A chat template drops, repeats, moves or rewrites one of the messages.

    ``index`` is the message's index in the conversation, ``change`` one of
    ``"dropped"``, ``"repeated"``, ``"moved"``, ``"stripped whitespace"``, ``"rewritten"``.
    """

    def __init__(self, message: str, *, index: int, change: str) -> None:
        super().__init__(message)
        self.index = index
        self.change = change


class PrefixRewriteError(TemplateError):
    """Appending a message changes bytes already sent (the server's prefix cache misses).

    ``char_offset`` is the first character of the sent text that differs.
    """

    def __init__(self, message: str, *, char_offset: int) -> None:
        super().__init__(message)
        self.char_offset = char_offset
