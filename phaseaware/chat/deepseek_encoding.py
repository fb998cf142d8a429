"""The encoding shared by DeepSeek-V4 and V4.1: one renderer, a dialect per model.

The two official encoders (``encoding_dsv4.py`` and V4.1's; vLLM carries them as
``vllm/tokenizers/deepseek_v4_encoding.py`` and ``deepseek_v41_encoding.py``)
run the same steps and differ in a few places, which :class:`Dialect` names.
This module re-implements the steps; the format modules
(:mod:`phaseaware.chat.deepseek_v4`, :mod:`phaseaware.chat.deepseek_v41`) own
the markers and the dialect, and document the rules.

Steps: (1) the settings' tool schemas and ``response_format`` attach to the
first system message (one with empty content is put first when there is none);
(2) tool messages become ``<tool_result>`` blocks, and runs of user and tool
messages merge into one user turn (blocks joined by ``"\\n\\n"``), tool results
reordered by the call order of the latest assistant turn with calls; (3) in
thinking mode with ``drop_thinking`` (off whenever tools are given), developer
turns before the last user turn are left out and assistant turns before it lose
their reasoning; (4) every turn is written, followed by the transition to the
assistant where the dialect's rule says so.
"""

from __future__ import annotations

import json
import sys
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

from phaseaware.caches import register_cache
from phaseaware.chat.deepseek_turns import TOOL_RESULT_CLOSE as TOOL_RESULT_CLOSE
from phaseaware.chat.deepseek_turns import TOOL_RESULT_OPEN as TOOL_RESULT_OPEN
from phaseaware.chat.deepseek_turns import (
    _call_order,
    _drop_thinking,
    _last_user,
    _sort_tool_results,
    _Turn,
    _turns,
)
from phaseaware.chat.errors import MessageContentError
from phaseaware.chat.messages import Message, ToolCall, check_roles, check_tool_results
from phaseaware.chat.prefix_renders import PrefixRenders
from phaseaware.chat.settings import (
    SETTING_NAMES,
    ChatSettings,
    check_supported,
)

__all__ = ["Dialect", "DeepSeekFormat", "tools_prompt", "to_json"]

THINK_OPEN = "<think>"
THINK_CLOSE = "</think>"
DSML = "｜DSML｜"
_ATTRIBUTE_BREAKERS = ('"', "<", ">", "\n")  # not allowed in DSML name="..." values


@dataclass(frozen=True)
class Dialect:
    """Where the V4 family's encoders differ (see the format modules)."""

    name: str
    bos: str
    eos: str
    user: str
    assistant: str
    latest_reminder: str
    system: str | None  # V4.1 writes a system token; V4 writes system text bare
    calls_tag: str
    invoke_tag: str
    parameter_tag: str
    # thinking-mode text before turn 0 for these settings, with the server's effort
    # mapping; raises UnsupportedSettingError for an effort the server refuses
    preamble: Callable[[ChatSettings], str]
    mid_system_opens_turn: bool  # V4.1: a system turn after the first counts as a user's
    markers: tuple[str, ...]  # every control string the format writes


def to_json(value: object) -> str:
    """JSON as the encoders write it (``ensure_ascii=False``, default separators)."""
    return json.dumps(value, ensure_ascii=False)


_TOOLS_HEAD = (
    "## Tools\n\nYou have access to a set of tools to help answer the user's question. "
    'You can invoke tools by writing a "<{d}{c}>" block like the following:\n\n'
)
_TOOLS_EXAMPLE = (
    "<{d}{c}>\n"
    '<{d}{i} name="$TOOL_NAME">\n'
    '<{d}{p} name="$PARAMETER_NAME" string="true|false">$PARAMETER_VALUE</{d}{p}>\n'
    "...\n"
    "</{d}{i}>\n"
    '<{d}{i} name="$TOOL_NAME2">\n'
    "...\n"
    "</{d}{i}>\n"
    "</{d}{c}>\n\n"
)
_TOOLS_RULES = (
    'String parameters should be specified as is and set `string="true"`. For all other '
    "types (numbers, booleans, arrays, objects), pass the value in JSON format and set "
    '`string="false"`.\n\n'
    "If thinking_mode is enabled (triggered by {o}), you MUST output your complete "
    "reasoning inside {o}...{e} BEFORE any tool calls or final response.\n\n"
    "Otherwise, output directly after {e} with tool calls or final response.\n\n"
    "### Available Tool Schemas\n\n"
)
_TOOLS_TAIL = (
    "\n\nYou MUST strictly follow the above defined tool name and parameter schemas to "
    "invoke tool calls.\n"
)
_RESPONSE_FORMAT = (
    "## Response Format:\n\nYou MUST strictly adhere to the following schema to reply:\n"
)


def tools_prompt(dialect: Dialect, functions: Sequence[dict[str, Any]]) -> str:
    """The ``## Tools`` section for the tools' ``function`` objects."""
    tags = {"d": DSML, "c": dialect.calls_tag, "i": dialect.invoke_tag, "p": dialect.parameter_tag}
    return (
        _TOOLS_HEAD.format(**tags)
        + _TOOLS_EXAMPLE.format(**tags)
        + _TOOLS_RULES.format(o=THINK_OPEN, e=THINK_CLOSE)
        + "\n".join(to_json(f) for f in functions)
        + _TOOLS_TAIL
    )


_CALL_TEXT_MAX = 4096
_CALL_TEXT: dict[tuple[Dialect, tuple[ToolCall, ...]], str] = {}  # bounded: oldest dropped
register_cache(
    "chat.deepseek tool-call text",
    size=lambda: (len(_CALL_TEXT), None),
    clear=_CALL_TEXT.clear,
    bound=f"{_CALL_TEXT_MAX} entries, oldest dropped",
)


class DeepSeekFormat:
    """A DeepSeek-V4-family encoding; subclasses name the dialect."""

    name = "deepseek"
    chat = True
    dialect: Dialect
    supported_settings = frozenset(SETTING_NAMES) - {"tool_arguments", "effort_texts"}
    supported_roles = frozenset(
        {"system", "developer", "user", "assistant", "tool", "latest_reminder"}
    )

    def __init__(
        self,
        *,
        thinking: bool = False,
        drop_thinking: bool = True,
        settings: ChatSettings | None = None,
    ) -> None:
        if settings is None:
            settings = ChatSettings(
                thinking=thinking, drop_thinking=None if drop_thinking else False
            )
        check_supported(settings, chat_format=self.name, supported=self.supported_settings)
        # validated here (the server refuses a bad effort in chat mode too); written in
        # thinking mode only
        self._preamble = self.dialect.preamble(settings)
        self.settings = settings
        self.thinking = settings.thinking
        # the encoder's rule: earlier reasoning is kept whenever tools are given
        self.drop_thinking = settings.drop_thinking is not False and not settings.tools

    @property
    def markers(self) -> tuple[str, ...]:
        """The control strings this format writes (the scanner breaks them in message text)."""
        return self.dialect.markers

    def __repr__(self) -> str:
        return f"{type(self).__name__}(settings={self.settings!r})"

    def _schemas(self) -> str:
        out = ""
        if self.settings.tools:
            out += "\n\n" + tools_prompt(self.dialect, self.settings.tool_functions())
        if self.settings.response_format is not None:
            out += "\n\n" + _RESPONSE_FORMAT + to_json(self.settings.response_format)
        return out

    def _tool_calls(self, message: Message) -> str:
        """The DSML block of the message's tool calls (memoised by the calls: an agent
        resends every earlier call each step, and the JSON parse is the costly part)."""
        if not message.tool_calls:
            return ""
        key = (self.dialect, message.tool_calls)
        known = _CALL_TEXT.get(key)
        if known is None:
            known = self._render_calls(message)
            _CALL_TEXT[key] = known
            while len(_CALL_TEXT) > _CALL_TEXT_MAX:
                _CALL_TEXT.pop(next(iter(_CALL_TEXT)))
        return known

    def _render_calls(self, message: Message) -> str:
        for call in message.tool_calls:
            for what, text in (
                ("name", call.name),
                *(("argument", k) for k in call.parsed_arguments()),
            ):
                if any(c in text for c in _ATTRIBUTE_BREAKERS):
                    raise MessageContentError(
                        f"tool call {call.name!r}: the {what} {text!r} holds a quote, angle "
                        f"bracket or newline, which would forge DSML attributes in {self.name}; "
                        "rename it"
                    )
        d = self.dialect
        invokes = []
        for call in message.tool_calls:
            params = "\n".join(
                f'<{DSML}{d.parameter_tag} name="{key}" '
                f'string="{"true" if isinstance(value, str) else "false"}">'
                f"{value if isinstance(value, str) else to_json(value)}"
                f"</{DSML}{d.parameter_tag}>"
                for key, value in call.parsed_arguments().items()
            )
            invokes.append(
                f'<{DSML}{d.invoke_tag} name="{call.name}">\n{params}\n</{DSML}{d.invoke_tag}>'
            )
        return f"\n\n<{DSML}{d.calls_tag}>\n" + "\n".join(invokes) + f"\n</{DSML}{d.calls_tag}>"

    def _body(self, index: int, turn: _Turn, keep_reasoning: bool) -> str:
        d, message = self.dialect, turn.message
        content = message.content if message is not None else ""
        if turn.role == "system":
            head = d.system if d.system is not None and index > 0 else ""
            return head + content + (self._schemas() if turn.schemas else "")
        if turn.role == "developer":
            return d.user + content + (self._schemas() if turn.schemas else "")
        if turn.role == "user":
            return d.user + "\n\n".join(text for text, _ in turn.blocks)
        if turn.role == "latest_reminder":
            return d.latest_reminder + content
        assert message is not None  # assistant
        thinking = ""
        if self.thinking and keep_reasoning:
            reasoning = (message.reasoning_content or "") if turn.reasoning else ""
            thinking = reasoning + THINK_CLOSE
        return thinking + content + self._tool_calls(message) + d.eos

    def _opens_turn(self, index: int, turns: Sequence[_Turn]) -> bool:
        role, last = turns[index].role, index + 1 == len(turns)
        if not last and turns[index + 1].role not in ("assistant", "latest_reminder"):
            return False
        if role in ("user", "developer"):
            return True
        if role != "system":
            return False
        if self.dialect.mid_system_opens_turn:
            return index > 0
        return last or turns[index + 1].role == "assistant"

    def render(self, messages: Sequence[Message], *, add_generation_prompt: bool = True) -> str:
        """``encode_messages`` of the official encoder with these settings.

        Raises :class:`~phaseaware.chat.errors.ToolResultError` for a tool message
        that answers no tool call and :class:`MessageContentError` for an empty
        developer message (the encoder refuses it).

        Incremental: where ``messages`` extend a conversation rendered recently with
        the same settings (an agent's conversation, one message more each step), the
        text up to that conversation's last turn is reused and only the turns from
        there are rendered (the same text as a whole render: each turn's text
        depends on the turn, the next turn's role and whether it closes the prompt;
        where it depends on more, the whole conversation is rendered).
        """
        settings = self.settings
        attach = bool(settings.tools) or settings.response_format is not None
        messages = tuple(messages)
        incremental = not (self.thinking and self.drop_thinking)
        key = self._render_key()
        # 2+ messages: the first turn's text is rendered again
        best = _RENDERS.longest(key, messages, min_messages=2) if incremental else None
        # a remembered prefix passed these checks: only the messages after it are checked
        done = 0 if best is None else len(best.messages)
        check_roles(messages, chat_format=self.name, roles=self.supported_roles, start=done)
        since = next((i for i in range(done - 1, 0, -1) if messages[i].role != "tool"), 0)
        check_tool_results(messages, start=since)
        for i in range(done, len(messages)):
            if messages[i].role == "developer" and not messages[i].content:
                raise MessageContentError(
                    f"message {i}: a developer message needs content ({self.name} refuses an "
                    "empty one); write its text, or leave the message out"
                )
        if self.thinking and self.drop_thinking:  # the last user turn reaches back: whole
            turns = _drop_thinking(
                _sort_tool_results(_turns(messages, attach=attach)[0]), self.dialect
            )
            last_user = _last_user(turns, self.dialect)
            pieces = [
                self._piece(i, turns, add_generation_prompt, last_user) for i in range(len(turns))
            ]
            return self.dialect.bos + "".join(pieces)
        rendered = (best and self._extend(best, messages, attach)) or self._whole(messages, attach)
        turns, firsts, starts, head, order = rendered
        tail = [
            self._piece(i, turns, add_generation_prompt, -1) for i in range(len(starts), len(turns))
        ]
        offsets = list(starts)
        at = len(head)
        for piece in tail[:-1]:
            offsets.append(at)
            at += len(piece)
        text = head + "".join(tail)
        if turns:  # kept for the next call: everything but the last turn's text
            for turn in turns[len(starts) : -1]:
                order = _call_order(turn, order)
            _RENDERS.put(
                key,
                _Rendered(messages, tuple(turns), tuple(firsts), tuple(offsets), text[:at], order),
            )
        return text

    def _render_key(self) -> tuple[object, ...]:
        return (type(self), self.dialect, self._preamble, self.thinking, self.drop_thinking,
                self._schemas())  # fmt: skip

    def _whole(
        self, messages: tuple[Message, ...], attach: bool
    ) -> tuple[list[_Turn], list[int], list[int], str, dict[str, int]]:
        """Turns, their first messages, no piece reused, the head text (BOS)."""
        turns, firsts = _turns(messages, attach=attach)
        return _sort_tool_results(turns), firsts, [], self.dialect.bos, {}

    def _extend(
        self, best: _Rendered, messages: tuple[Message, ...], attach: bool
    ) -> tuple[list[_Turn], list[int], list[int], str, dict[str, int]] | None:
        """``best`` (a remembered render of a prefix of ``messages``) extended: its turns
        before its last one (their text kept, ``head``), the turns from there recomputed."""
        last = len(best.turns) - 1  # rendered again: its text depends on what follows
        first_system = next((i for i, m in enumerate(best.messages) if m.role == "system"), None)
        if last < 1 or (attach and first_system is None):
            return None  # the first turn's text, or schemas a later system message carries
        order = best.order
        tail, firsts = _turns(
            messages, attach=attach, first_system=first_system, start=best.firsts[last]
        )
        turns = [*best.turns[:last], *_sort_tool_results(tail, order)]
        return turns, [*best.firsts[:last], *firsts], list(best.starts), best.text, order

    def _piece(
        self, i: int, turns: Sequence[_Turn], add_generation_prompt: bool, last_user: int
    ) -> str:
        """Turn ``i``'s text: its head (the first turn's), body and any assistant opener."""
        parts = []
        turn = turns[i]
        if i == 0 and self.thinking:
            preamble = self._preamble
            if self.dialect.system is not None and (preamble or turn.role == "system"):
                parts.append(self.dialect.system)
            parts.append(preamble)
        elif i == 0 and turn.role == "system" and self.dialect.system is not None:
            parts.append(self.dialect.system)
        parts.append(self._body(i, turn, not self.drop_thinking or i > last_user))
        closing = i + 1 == len(turns)
        if self._opens_turn(i, turns) and (add_generation_prompt or not closing):
            thinks = self.thinking and (not self.drop_thinking or i >= last_user)
            parts.append(self.dialect.assistant + (THINK_OPEN if thinks else THINK_CLOSE))
        return "".join(parts)


@dataclass(frozen=True)
class _Rendered:
    """A render kept for the next call: ``text`` is every turn's but the last one's;
    ``starts[i]``: where turn ``i``'s text starts (turns before the last)."""

    messages: tuple[Message, ...]
    turns: tuple[_Turn, ...]
    firsts: tuple[int, ...]  # the message each turn starts at
    starts: tuple[int, ...]
    text: str
    order: dict[str, int]  # the tool-call order before the last turn


# by settings, length and last message: a layout renders one conversation with several
# contents in its last message (a sentinel, stand-ins, the context)
_RENDERS: PrefixRenders[_Rendered] = PrefixRenders(
    name="chat.deepseek renders", size_of=lambda entry: sys.getsizeof(entry.text)
)
