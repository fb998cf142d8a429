"""Chat messages, the one ``{context}`` slot, and ``{question}`` placeholders.

A conversation is a list of OpenAI-style messages (``{"role", "content", ...}``)
with roles ``system``, ``user``, ``assistant`` and ``tool`` (and DeepSeek's
``developer`` and ``latest_reminder``, which only the ``deepseek-v4`` formats
render; the others refuse them, see :func:`check_roles`). It holds exactly one
context slot: the literal ``{context}`` inside one message's content. A message
whose whole content is ``{context}`` is a context message of its own (a
retrieved block as a user turn, a tool result, ...). ``{question}`` may appear
any number of times in any message's content; each is replaced by the question
text. Nothing else is a placeholder (``{foo}`` and single braces stay as they
are), and replacing placeholders never rescans inserted text: a question that
contains ``{context}`` is not a second slot.

Literal braces: ``{{context}}`` and ``{{question}}`` are the text ``{context}``
and ``{question}`` (:func:`escape_placeholders` writes any text so). Fetched text
is never searched for placeholders: retrieved chunks fill the slot as they are,
and a ``tool`` message (a tool's result) is read verbatim, escapes included,
unless it holds the slot: when no other message holds ``{context}``, the last
tool message that does is a template (e.g. ``"Result:\n{context}"``).

Optional fields, as the chat formats need them: ``tool_calls`` (assistant, each
``{"id", "type": "function", "function": {"name", "arguments"}}`` with
``arguments`` a JSON object string), ``tool_call_id`` (tool), ``name``, and
``reasoning_content`` (assistant; ``reasoning`` is accepted as its alias).
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace
from enum import Enum
from typing import Any, Literal, cast

from phaseaware.caches import BoundedCache
from phaseaware.chat.errors import (
    DuplicateSlotError,
    MessageContentError,
    MissingSlotError,
    UnknownRoleError,
)
from phaseaware.chat.message_checks import check_roles as check_roles
from phaseaware.chat.message_checks import check_tool_results as check_tool_results

__all__ = [
    "ROLES",
    "Role",
    "ToolCall",
    "Message",
    "ConversationTemplate",
    "Placeholder",
    "simple_conversation",
    "CONTEXT_PLACEHOLDER",
    "QUESTION_PLACEHOLDER",
    "parse_message",
    "parse_messages",
    "parse_conversation",
    "check_tool_results",
    "check_roles",
    "COMMON_ROLES",
    "escape_placeholders",
]

Role = Literal["system", "user", "assistant", "tool", "developer", "latest_reminder"]
ROLES: tuple[Role, ...] = ("system", "user", "assistant", "tool", "developer", "latest_reminder")
#: the roles every chat format renders
COMMON_ROLES = frozenset({"system", "user", "assistant", "tool"})
CONTEXT_PLACEHOLDER = "{context}"
QUESTION_PLACEHOLDER = "{question}"
# an escaped placeholder (group 1: literal text) or a placeholder (group 2), leftmost first
_PLACEHOLDER = re.compile(r"\{\{(context|question)\}\}|\{(context|question)\}")
_KNOWN_KEYS = frozenset(
    {"role", "content", "tool_calls", "tool_call_id", "name", "reasoning_content", "reasoning"}
)


@dataclass(frozen=True)
class ToolCall:
    """One function call of an assistant turn; ``arguments`` is a JSON object as text."""

    name: str
    arguments: str = "{}"
    id: str | None = None

    def parsed_arguments(self) -> dict[str, Any]:
        """``arguments`` decoded (a dict; checked when the call was parsed)."""
        return cast(dict[str, Any], json.loads(self.arguments))

    def to_openai(self) -> dict[str, Any]:
        call: dict[str, Any] = {"type": "function"}
        if self.id is not None:
            call["id"] = self.id
        call["function"] = {"name": self.name, "arguments": self.arguments}
        return call


@dataclass(frozen=True)
class Message:
    """One chat message. ``content`` is text (``None`` in input becomes ``""``)."""

    role: Role
    content: str
    tool_calls: tuple[ToolCall, ...] = ()
    tool_call_id: str | None = None
    name: str | None = None
    reasoning_content: str | None = None

    def with_content(self, content: str) -> Message:
        """This message with ``content`` (itself when it already holds it: frozen, and
        a conversation resent every agent step is not copied message by message)."""
        if content == self.content:
            return self
        return replace(self, content=content)

    def to_openai(self) -> dict[str, Any]:
        """The OpenAI-style dict; optional fields only where set (templates test presence)."""
        out: dict[str, Any] = {"role": self.role, "content": self.content}
        if self.tool_calls:
            out["tool_calls"] = [call.to_openai() for call in self.tool_calls]
        for key in ("tool_call_id", "name", "reasoning_content"):
            value = getattr(self, key)
            if value is not None:
                out[key] = value
        return out


def _text_field(index: int, raw: Mapping[str, Any], key: str) -> str | None:
    value = raw.get(key)
    if value is None or isinstance(value, str):
        return value
    raise MessageContentError(
        f"message {index}: {key!r} must be a string, got {type(value).__name__}"
    )


def _tool_call(index: int, position: int, raw: object) -> ToolCall:
    where = f"message {index}: tool_calls[{position}]"
    if not isinstance(raw, Mapping) or not isinstance(raw.get("function"), Mapping):
        raise MessageContentError(
            f'{where} must be {{"type": "function", "function": {{"name": ..., "arguments": '
            '"{...}"}}'
        )
    function = raw["function"]
    name, arguments = function.get("name"), function.get("arguments", "{}")
    if not isinstance(name, str) or not name:
        raise MessageContentError(f"{where}: function.name must be a non-empty string")
    if isinstance(arguments, Mapping):
        arguments = json.dumps(dict(arguments), ensure_ascii=False)
    if not isinstance(arguments, str):
        raise MessageContentError(f"{where}: function.arguments must be a JSON object string")
    try:
        decoded = json.loads(arguments)
    except ValueError as exc:
        raise MessageContentError(
            f"{where}: function.arguments is not valid JSON ({exc}); pass a JSON object string"
        ) from None
    if not isinstance(decoded, dict):
        raise MessageContentError(f"{where}: function.arguments must encode a JSON object")
    call_id = raw.get("id")
    if call_id is not None and not isinstance(call_id, str):
        raise MessageContentError(f"{where}: id must be a string")
    return ToolCall(name=name, arguments=arguments, id=call_id)


def parse_message(raw: Mapping[str, Any] | Message, *, index: int = 0) -> Message:
    """One OpenAI-style message dict as a :class:`Message` (a ``Message`` passes through).

    Raises :class:`UnknownRoleError` for a role outside :data:`ROLES` and
    :class:`MessageContentError` for non-text content or malformed fields.
    """
    if isinstance(raw, Message):
        return raw
    if not isinstance(raw, Mapping):
        raise MessageContentError(
            f'message {index} must be an object like {{"role": "user", "content": "..."}}, '
            f"got {type(raw).__name__}"
        )
    role = raw.get("role")
    if role not in ROLES:
        raise UnknownRoleError(f"message {index} has role {role!r}; use one of {', '.join(ROLES)}")
    unknown = sorted(set(raw) - _KNOWN_KEYS)
    if unknown:
        raise MessageContentError(
            f"message {index} has unknown keys {unknown}; known keys: {sorted(_KNOWN_KEYS)}"
        )
    content = raw.get("content")
    if isinstance(content, list):
        raise MessageContentError(
            f"message {index}: content is a list of parts; join its text parts into one "
            "string (images and other parts cannot be placed)"
        )
    if content is not None and not isinstance(content, str):
        raise MessageContentError(
            f"message {index}: content must be a string, got {type(content).__name__}"
        )
    calls_raw = raw.get("tool_calls") or []
    if not isinstance(calls_raw, list) or (calls_raw and role != "assistant"):
        raise MessageContentError(
            f"message {index}: tool_calls must be a list, on an assistant message only"
        )
    reasoning = _text_field(index, raw, "reasoning_content")
    alias = _text_field(index, raw, "reasoning")
    if reasoning is not None and alias is not None and reasoning != alias:
        raise MessageContentError(
            f"message {index}: reasoning and reasoning_content differ; pass one of them"
        )
    return Message(
        role=cast(Role, role),
        content=content or "",
        tool_calls=tuple(_tool_call(index, i, c) for i, c in enumerate(calls_raw)),
        tool_call_id=_text_field(index, raw, "tool_call_id"),
        name=_text_field(index, raw, "name"),
        reasoning_content=reasoning if reasoning is not None else alias,
    )


def parse_messages(raw: Sequence[Mapping[str, Any] | Message]) -> tuple[Message, ...]:
    """Every message of ``raw`` parsed (see :func:`parse_message`); at least one.

    A dict parsed before (equal in every field that :func:`parse_message` reads) gives
    the same :class:`Message` object again, without decoding its tool calls anew: an
    agent resends the whole conversation each step."""
    if isinstance(raw, str | bytes | Mapping) or not isinstance(raw, Sequence) or not raw:
        raise MessageContentError(
            'messages must be a non-empty list of {"role": ..., "content": ...} objects'
        )
    return tuple(_parse_known(m, i) for i, m in enumerate(raw))


_PARSED: BoundedCache[tuple[object, ...], Message] = BoundedCache(
    max_entries=4096,
    max_bytes=64 << 20,
    size_of=lambda key, _: sum(len(v) for v in key if isinstance(v, str)) + 200,
    name="chat.parsed messages",
)


def _memo_key(raw: Mapping[str, Any]) -> tuple[object, ...] | None:
    """Every field :func:`parse_message` reads, as a hashable key (``None``: a shape the
    memo does not take; the message is parsed, and refused where it is wrong)."""
    if not raw.keys() <= _KNOWN_KEYS:
        return None
    get = raw.get
    key: tuple[object, ...] = (
        get("role"), get("content"), get("tool_call_id"), get("name"),
        get("reasoning_content"), get("reasoning"),
    )  # fmt: skip
    for value in key:
        if value is not None and type(value) is not str:
            return None
    calls = get("tool_calls")
    if calls:
        if type(calls) is not list:
            return None
        for call in calls:
            function = call.get("function") if isinstance(call, Mapping) else None
            if not isinstance(function, Mapping):
                return None
            values = (call.get("id"), function.get("name"), function.get("arguments", "{}"))
            for value in values:
                if value is not None and type(value) is not str:
                    return None
            key += values
    return key


def _parse_known(raw: Mapping[str, Any] | Message, index: int) -> Message:
    if isinstance(raw, Message) or not isinstance(raw, Mapping):
        return parse_message(raw, index=index)
    key = _memo_key(raw)
    if key is None:
        return parse_message(raw, index=index)
    known = _PARSED.get(key)
    if known is None:
        known = parse_message(raw, index=index)
        _PARSED.put(key, known)
    return known


class Placeholder(Enum):
    """A place in a message's content that is filled at render time."""

    CONTEXT = CONTEXT_PLACEHOLDER
    QUESTION = QUESTION_PLACEHOLDER


Part = str | Placeholder


@dataclass(frozen=True)
class ConversationTemplate:
    """Messages whose contents are ``parts``: text and placeholders, one ``CONTEXT`` in all.

    ``messages[i].content`` is the template text of message ``i`` (as the caller
    wrote it, from :func:`parse_conversation`; placeholders written out, from
    :meth:`from_parts`); ``parts[i]`` is the same content split into text and
    :class:`Placeholder` items. ``slot_index`` is the message holding ``CONTEXT``.
    """

    messages: tuple[Message, ...]
    parts: tuple[tuple[Part, ...], ...]
    slot_index: int

    def fill(self, *, context: str, question: str) -> tuple[Message, ...]:
        """Messages with the slot set to ``context`` and every ``{question}`` to ``question``."""
        values = {Placeholder.CONTEXT: context, Placeholder.QUESTION: question}
        return tuple(
            message.with_content(
                "".join(values[p] if isinstance(p, Placeholder) else p for p in parts)
            )
            for message, parts in zip(self.messages, self.parts, strict=True)
        )

    @classmethod
    def from_parts(
        cls, messages: Sequence[Message], parts: Sequence[Sequence[Part]]
    ) -> ConversationTemplate:
        """A template from explicit parts (no placeholder parsing: text is taken verbatim)."""
        parts_t = tuple(tuple(p for p in ps if p != "") for ps in parts)
        slots = [i for i, ps in enumerate(parts_t) for p in ps if p is Placeholder.CONTEXT]
        _check_slots([(i, slots.count(i)) for i in sorted(set(slots))])
        written = tuple(
            m.with_content("".join(p.value if isinstance(p, Placeholder) else p for p in ps))
            for m, ps in zip(messages, parts_t, strict=True)
        )
        return cls(messages=written, parts=parts_t, slot_index=slots[0])


def simple_conversation(*, system: str | None) -> ConversationTemplate:
    """Today's shape: ``[system?, user(context + "\\n\\n" + question)]`` (system verbatim;
    ``None`` or ``""`` means no system message)."""
    messages = [Message(role="system", content="")] if system else []
    parts: list[list[Part]] = [[system]] if system else []
    messages.append(Message(role="user", content=""))
    parts.append([Placeholder.CONTEXT, "\n\n", Placeholder.QUESTION])
    return ConversationTemplate.from_parts(messages, parts)


def escape_placeholders(text: str) -> str:
    """``text`` written so that a message holding it renders it as it is: every
    ``{context}`` and ``{question}`` in it doubled to ``{{context}}``/``{{question}}``."""
    return text.replace(CONTEXT_PLACEHOLDER, "{{context}}").replace(
        QUESTION_PLACEHOLDER, "{{question}}"
    )


def _split_placeholders(content: str) -> list[Part]:
    parts: list[Part] = []
    text, last = "", 0
    for match in _PLACEHOLDER.finditer(content):
        text += content[last : match.start()]
        last = match.end()
        if match.group(1) is not None:  # escaped: the literal placeholder text
            text += "{" + match.group(1) + "}"
            continue
        parts += [text, Placeholder(match.group(0))]
        text = ""
    parts.append(text + content[last:])
    return parts


def _template_parts(messages: Sequence[Message]) -> list[list[Part]]:
    """Each message split into text and placeholders; tool messages verbatim (fetched
    text), but for the last one holding the slot when no other message holds one."""
    parts = [_split_placeholders(m.content) for m in messages]
    holds = [Placeholder.CONTEXT in p for p in parts]
    tool_slot = None
    if not any(h for m, h in zip(messages, holds, strict=True) if m.role != "tool"):
        tool_slot = max((i for i, h in enumerate(holds) if h), default=None)
    return [
        [m.content] if m.role == "tool" and i != tool_slot else p
        for i, (m, p) in enumerate(zip(messages, parts, strict=True))
    ]


def _check_slots(holders: Sequence[tuple[int, int]]) -> None:
    if not holders:
        raise MissingSlotError(
            "no message holds the context slot; put the literal {context} where the "
            'retrieved text goes (in any message, or as a message of its own: {"role": '
            '"user", "content": "{context}"})'
        )
    total = sum(n for _, n in holders)
    if total > 1:
        where = ", ".join(f"message {i} ({n}x)" for i, n in holders)
        raise DuplicateSlotError(
            f"the conversation holds {total} context slots ({where}); keep exactly one "
            "{context} and write a literal one as {{context}} (escape_placeholders)"
        )


def parse_conversation(raw: Sequence[Mapping[str, Any] | Message]) -> ConversationTemplate:
    """Parse ``raw`` and locate its one ``{context}`` slot and its ``{question}`` placeholders
    (escapes and tool messages: see the module doc). ``messages`` of the result are the
    messages as written.

    Raises :class:`MissingSlotError` (no slot) or :class:`DuplicateSlotError`
    (two or more, in one message or several), besides the errors of
    :func:`parse_messages`.
    """
    messages = parse_messages(raw)
    parts = _template_parts(messages)
    counts = [(i, p.count(Placeholder.CONTEXT)) for i, p in enumerate(parts)]
    _check_slots([(i, n) for i, n in counts if n])
    return replace(ConversationTemplate.from_parts(messages, parts), messages=messages)
