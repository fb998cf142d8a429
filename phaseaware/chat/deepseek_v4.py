"""DeepSeek-V4 chat encoding, multi-turn, with tool calls and thinking on or off.

Source: DeepSeek's official encoder ``encoding/encoding_dsv4.py`` shipped with the
DeepSeek-V4 model repositories (``deepseek-ai/DeepSeek-V4-Flash``; vLLM carries
it as ``vllm/tokenizers/deepseek_v4_encoding.py``), the successor of V3.2's
``encoding/encoding_dsv32.py`` (``deepseek-ai/DeepSeek-V3.2``). This module
re-implements ``encode_messages(messages, thinking_mode, drop_thinking=...)``
for the roles phaseaware accepts; the test suite checks it against an
independent transliteration of that encoder.

What the encoder does, in order:

1. **Tool results become user turns.** There is no tool role in V4: each tool
   message becomes a ``<tool_result>{content}</tool_result>`` block, and runs of
   consecutive user and tool messages merge into ONE user turn whose blocks are
   joined by ``"\\n\\n"``. Within a turn, tool results are stably reordered by the
   position of their ``tool_call_id`` among the tool calls of the latest
   assistant turn that made calls (unknown ids sort as position 0).
2. **Turns.** ``BOS`` once, then: system -> its content verbatim; user ->
   ``<｜User｜>`` + blocks; assistant -> ``[reasoning + "</think>"] + content +
   [tool calls] + <｜end▁of▁sentence｜>``, where tool calls are
   ``"\\n\\n<｜DSML｜tool_calls>\\n" + invokes + "\\n</｜DSML｜tool_calls>"``, each
   invoke ``<｜DSML｜invoke name="NAME">\\n`` + one
   ``<｜DSML｜parameter name="K" string="true|false">V</｜DSML｜parameter>`` per
   argument (strings verbatim, other values as JSON) + ``\\n</｜DSML｜invoke>``.
3. **Transitions.** A user turn that is the last turn or is followed by an
   assistant turn is closed by ``<｜Assistant｜>`` plus ``</think>``
   (non-thinking) or ``<think>`` (thinking: only after the LAST user turn when
   ``drop_thinking``, after every user turn otherwise). A user turn followed by
   a system turn gets no transition.
4. **Earlier reasoning is dropped** (thinking with ``drop_thinking``, the
   encoder's default): assistant turns before the last user turn lose their
   reasoning and ``</think>``; those after it keep ``reasoning + </think>``.
   Non-thinking mode never writes reasoning. The official encoder turns
   ``drop_thinking`` off by itself when a message defines ``tools``; phaseaware
   does not render tool schemas, so pass ``drop_thinking=False`` in that case.

Not supported (not accepted as input): the ``developer`` and
``latest_reminder`` roles, ``tools``/``response_format`` schemas, task tokens,
``reasoning_effort`` and ``wo_eos``. One extension: ``add_generation_prompt=False``
omits the final transition after a closing user turn (the encoder always
writes it).

Prefix stability (what append alignment relies on): appending messages leaves
the earlier text byte-identical except (a) a user or tool message appended
directly after a user/tool message joins that turn, replacing the closing
transition by ``"\\n\\n"``; (b) in thinking mode with ``drop_thinking``, a new
user or tool message makes the previous last user turn non-last, which turns
its ``<think>`` into ``</think>`` and drops the reasoning of the assistant turns
after it. Non-thinking mode after an assistant message is always stable.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass, replace
from typing import Literal

from phaseaware.chat.messages import Message, check_tool_results
from phaseaware.chat.settings import SETTING_NAMES, ChatSettings

__all__ = ["DeepSeekV4Format", "BOS", "EOS", "USER", "ASSISTANT", "THINK_OPEN", "THINK_CLOSE"]

BOS = "<｜begin▁of▁sentence｜>"
EOS = "<｜end▁of▁sentence｜>"
USER = "<｜User｜>"
ASSISTANT = "<｜Assistant｜>"
THINK_OPEN = "<think>"
THINK_CLOSE = "</think>"
DSML = "｜DSML｜"


@dataclass(frozen=True)
class _Turn:
    """A V4 turn: system, assistant (``message``) or a merged user turn (``blocks``)."""

    role: Literal["system", "user", "assistant"]
    message: Message | None = None
    blocks: tuple[tuple[str, str | None], ...] = ()  # (rendered block, tool_call_id or None)


def _block(message: Message) -> tuple[str, str | None]:
    if message.role == "tool":
        return f"<tool_result>{message.content}</tool_result>", message.tool_call_id or ""
    return message.content, None


def _merge(messages: Sequence[Message]) -> list[_Turn]:
    turns: list[_Turn] = []
    for message in messages:
        if message.role in ("user", "tool"):
            if turns and turns[-1].role == "user":
                turns[-1] = replace(turns[-1], blocks=(*turns[-1].blocks, _block(message)))
            else:
                turns.append(_Turn(role="user", blocks=(_block(message),)))
        elif message.role == "system":
            turns.append(_Turn(role="system", message=message))
        else:
            turns.append(_Turn(role="assistant", message=message))
    return turns


def _sort_tool_results(turns: list[_Turn]) -> list[_Turn]:
    order: dict[str, int] = {}
    out = []
    for turn in turns:
        if turn.role == "assistant" and turn.message is not None and turn.message.tool_calls:
            order = {c.id: i for i, c in enumerate(turn.message.tool_calls) if c.id}
        tool_blocks = [b for b in turn.blocks if b[1] is not None]
        if turn.role == "user" and len(tool_blocks) > 1 and order:
            ranked = iter(sorted(tool_blocks, key=lambda b: order.get(b[1] or "", 0)))
            turn = replace(
                turn, blocks=tuple(next(ranked) if b[1] is not None else b for b in turn.blocks)
            )
        out.append(turn)
    return out


def _tool_calls(message: Message) -> str:
    if not message.tool_calls:
        return ""
    invokes = []
    for call in message.tool_calls:
        params = "\n".join(
            f'<{DSML}parameter name="{key}" string="{"true" if isinstance(value, str) else "false"}">'
            f"{value if isinstance(value, str) else json.dumps(value, ensure_ascii=False)}"
            f"</{DSML}parameter>"
            for key, value in call.parsed_arguments().items()
        )
        invokes.append(f'<{DSML}invoke name="{call.name}">\n{params}\n</{DSML}invoke>')
    return f"\n\n<{DSML}tool_calls>\n" + "\n".join(invokes) + f"\n</{DSML}tool_calls>"


class DeepSeekV4Format:
    """DeepSeek-V4's official chat encoding (see the module docstring)."""

    name = "deepseek-v4"
    chat = True

    supported_settings = frozenset(SETTING_NAMES)

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
        self.settings = settings
        self.thinking = settings.thinking
        self.drop_thinking = settings.drop_thinking is not False

    def __repr__(self) -> str:
        return f"DeepSeekV4Format(settings={self.settings!r})"

    def render(self, messages: Sequence[Message], *, add_generation_prompt: bool = True) -> str:
        """``encode_messages(messages, thinking_mode, drop_thinking)`` of the official encoder.

        Raises :class:`~phaseaware.chat.errors.ToolResultError` for a tool message
        that answers no tool call.
        """
        check_tool_results(messages)
        turns = _sort_tool_results(_merge(messages))
        last_user = max((i for i, t in enumerate(turns) if t.role == "user"), default=-1)
        keep_all = not self.drop_thinking
        parts = [BOS]
        for i, turn in enumerate(turns):
            if turn.role == "system" and turn.message is not None:
                parts.append(turn.message.content)
            elif turn.role == "assistant" and turn.message is not None:
                message = turn.message
                if self.thinking and (keep_all or i > last_user):
                    parts.append((message.reasoning_content or "") + THINK_CLOSE)
                parts.append(message.content + _tool_calls(message) + EOS)
            else:
                parts.append(USER + "\n\n".join(text for text, _ in turn.blocks))
                closing = i + 1 == len(turns)
                if (closing and add_generation_prompt) or (
                    not closing and turns[i + 1].role == "assistant"
                ):
                    thinks = self.thinking and (keep_all or i >= last_user)
                    parts.append(ASSISTANT + (THINK_OPEN if thinks else THINK_CLOSE))
        return "".join(parts)
