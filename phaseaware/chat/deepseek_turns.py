"""The turns of a DeepSeek-V4-family conversation: consecutive user and tool messages
merge into one user turn (tool results in the order of the calls they answer), and in
thinking mode with ``drop_thinking`` earlier reasoning is dropped before the last user
turn. :mod:`phaseaware.chat.deepseek_encoding` renders them."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, replace
from typing import Protocol

from phaseaware.chat.messages import Message


class Dialect(Protocol):
    """What the turn rules read of a dialect (``deepseek_encoding.Dialect``)."""

    @property
    def mid_system_opens_turn(self) -> bool: ...


TOOL_RESULT_OPEN = "<tool_result>"
TOOL_RESULT_CLOSE = "</tool_result>"


@dataclass(frozen=True)
class _Turn:
    role: str  # system, developer, user, assistant, latest_reminder
    message: Message | None = None  # None: a user turn (blocks) or the synthesised system
    blocks: tuple[tuple[str, str | None], ...] = ()  # (text, tool_call_id or None)
    schemas: bool = False  # the tool schemas and response format attach here
    reasoning: bool = True  # False: dropped by drop_thinking


def _block(message: Message) -> tuple[str, str | None]:
    if message.role == "tool":
        return TOOL_RESULT_OPEN + message.content + TOOL_RESULT_CLOSE, message.tool_call_id or ""
    return message.content, None


def _turns(
    messages: Sequence[Message], *, attach: bool, first_system: int | None = None, start: int = 0
) -> tuple[list[_Turn], list[int]]:
    """The turns of ``messages[start:]`` (the whole list's ``first_system``), and the
    index of the message each turn starts at."""
    if start == 0:
        first_system = next((i for i, m in enumerate(messages) if m.role == "system"), None)
    turns: list[_Turn] = []
    firsts: list[int] = []
    if attach and first_system is None:
        turns.append(_Turn(role="system", schemas=True))
        firsts.append(0)
    for i in range(start, len(messages)):
        message = messages[i]
        if message.role in ("user", "tool"):
            if turns and turns[-1].role == "user":
                turns[-1] = replace(turns[-1], blocks=(*turns[-1].blocks, _block(message)))
            else:
                turns.append(_Turn(role="user", blocks=(_block(message),)))
                firsts.append(i)
        else:
            turns.append(
                _Turn(role=message.role, message=message, schemas=attach and i == first_system)
            )
            firsts.append(i)
    return turns, firsts


def _call_order(turn: _Turn, order: dict[str, int]) -> dict[str, int]:
    """The tool-call order after ``turn`` (an assistant turn with calls sets it)."""
    if turn.role == "assistant" and turn.message is not None and turn.message.tool_calls:
        return {c.id: i for i, c in enumerate(turn.message.tool_calls) if c.id}
    return order


def _sort_tool_results(turns: list[_Turn], order: dict[str, int] | None = None) -> list[_Turn]:
    order = {} if order is None else order
    out = []
    for turn in turns:
        order = _call_order(turn, order)
        results = [b for b in turn.blocks if b[1] is not None]
        if turn.role == "user" and len(results) > 1 and order:
            ranked = iter(sorted(results, key=lambda b: order.get(b[1] or "", 0)))
            turn = replace(
                turn, blocks=tuple(next(ranked) if b[1] is not None else b for b in turn.blocks)
            )
        out.append(turn)
    return out


def _last_user(turns: Sequence[_Turn], dialect: Dialect) -> int:
    for i in range(len(turns) - 1, -1, -1):
        role = turns[i].role
        if role in ("user", "developer") or (
            dialect.mid_system_opens_turn and role == "system" and i > 0
        ):
            return i
    return -1


def _drop_thinking(turns: list[_Turn], dialect: Dialect) -> list[_Turn]:
    last = _last_user(turns, dialect)
    out = []
    for i, turn in enumerate(turns):
        if i >= last or turn.role in ("user", "system", "latest_reminder"):
            out.append(turn)
        elif turn.role == "assistant":
            out.append(replace(turn, reasoning=False))
        # a developer turn before the last user turn is left out
    return out
