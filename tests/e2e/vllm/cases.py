"""Conversations and chat settings the vLLM tier compares, and phaseaware's side of it.

Each setting names what the request sends (``chat_template_kwargs``, ``tools``) and
what phaseaware renders with; ``kwargs=None`` is the server default (the request names
no thinking setting), which phaseaware models as the default ``probe-endpoint``
discovers (DeepSeek-V4/V4.1 in vLLM: thinking on, effort "high").
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from phaseaware.chat import get_chat_format, parse_messages
from phaseaware.tokenizers.base import Tokenizer
from tests.support.chat_cases import WEATHER_TOOL

_CALL = {
    "id": "call_1",
    "type": "function",
    "function": {"name": "get_weather", "arguments": json.dumps({"city": "Paris"})},
}

CONVERSATIONS: dict[str, list[dict[str, Any]]] = {
    "user": [{"role": "user", "content": "Hello, who are you?"}],
    "system+user": [
        {"role": "system", "content": "You are terse."},
        {"role": "user", "content": "Name three rivers in France."},
    ],
    "user-assistant-user": [
        {"role": "user", "content": "What is 2 + 2?"},
        {"role": "assistant", "content": "4"},
        {"role": "user", "content": "And times 3?"},
    ],
    "multi-turn": [
        {"role": "system", "content": "Answer in one line."},
        {"role": "user", "content": "What is 2 + 2?"},
        {"role": "assistant", "content": "4"},
        {"role": "user", "content": "And times 3?"},
    ],
    "tool-loop": [
        {"role": "user", "content": "What is the weather in Paris?"},
        {
            "role": "assistant",
            "content": "",
            "reasoning_content": "I should call the weather tool.",
            "tool_calls": [_CALL],
        },
        {"role": "tool", "tool_call_id": "call_1", "content": '{"temp_c": 18, "sky": "clear"}'},
    ],
    "tool-loop-then-user": [
        {"role": "user", "content": "What is the weather in Paris?"},
        {
            "role": "assistant",
            "content": "",
            "reasoning_content": "I should call the weather tool.",
            "tool_calls": [_CALL],
        },
        {"role": "tool", "tool_call_id": "call_1", "content": '{"temp_c": 18, "sky": "clear"}'},
        {"role": "assistant", "content": "It is 18 C and clear.", "reasoning_content": "Easy."},
        {"role": "user", "content": "Thanks. And tomorrow?"},
    ],
}
TOOL_CASES = ("tool-loop", "tool-loop-then-user")


@dataclass(frozen=True)
class Setting:
    """What the request sends and what phaseaware renders with."""

    name: str
    kwargs: Mapping[str, Any] | None  # chat_template_kwargs; None: the server default
    thinking: bool
    effort: str | int | None = None  # phaseaware's reasoning_effort: the value sent
    tools: Sequence[Mapping[str, Any]] = field(default=())
    field_effort: str | None = None  # the request's own reasoning_effort field


def deepseek_settings(efforts: Sequence[str | int], *, v41: bool) -> list[Setting]:
    """Defaults, thinking off/on, each effort the server takes (as sent: phaseaware maps it
    as the server does), each with and without tools; then the request's own
    ``reasoning_effort`` field (LangChain's standard parameter) and an effort with
    thinking off."""
    out = [
        Setting("default", None, thinking=True, effort="high"),
        Setting("thinking off", {"thinking": False}, thinking=False),
        # the server picks effort "high" when thinking is on and none is named
        Setting("thinking on", {"thinking": True}, thinking=True, effort="high"),
    ]
    out += [
        Setting(f"effort {e}", {"thinking": True, "reasoning_effort": e}, thinking=True, effort=e)
        for e in efforts
    ]
    with_tools = [
        Setting(f"{s.name} + tools", s.kwargs, s.thinking, s.effort, (WEATHER_TOOL,)) for s in out
    ]
    field_names = ("low", "high", "none") if v41 else ("medium", "xhigh", "none")
    extra = [
        # the field alone: vLLM turns thinking on for it (enable_thinking = effort != "none")
        Setting(f"field {e}", None, thinking=e != "none", effort=e, field_effort=e)
        for e in field_names
    ]
    extra.append(
        Setting(
            "thinking off, effort max",
            {"thinking": False, "reasoning_effort": "max"},
            thinking=False,
            effort="max",
        )
    )
    return out + with_tools + extra


V4_SETTINGS = deepseek_settings(
    ("low", "minimal", "medium", "high", "xhigh", "max", "none", 37), v41=False
)
V41_SETTINGS = deepseek_settings(("low", "high", "xhigh", "max", "none", 37), v41=True)
HF_SETTINGS = [Setting("hf", {}, thinking=False)]


class Unsupported(Exception):
    """phaseaware cannot render this setting yet (the reason is the message)."""


def _settings_type() -> Any:
    import phaseaware.chat as chat

    return getattr(chat, "ChatSettings", None)


def local_text(
    tokenizer: Tokenizer, chat_format: str, messages: Sequence[Mapping[str, Any]], s: Setting
) -> str:
    """phaseaware's rendering of ``messages`` under setting ``s``."""
    parsed = parse_messages(messages)
    settings_type = _settings_type()
    if settings_type is None:
        if s.effort is not None or s.tools:
            raise Unsupported("phaseaware's chat formats take no reasoning_effort/tools yet")
        return get_chat_format(chat_format, tokenizer, thinking=s.thinking).render(parsed)
    from phaseaware.chat import ChatSettingsError

    try:
        settings = settings_type(
            thinking=s.thinking, reasoning_effort=s.effort, tools=tuple(s.tools)
        )
        return get_chat_format(chat_format, tokenizer, settings=settings).render(parsed)
    except ChatSettingsError as exc:
        raise Unsupported(str(exc)) from exc


def request_messages(messages: Sequence[Mapping[str, Any]]) -> list[dict[str, Any]]:
    """The messages as sent: ``reasoning_content`` also as ``reasoning`` (vLLM's chat route
    reads that name)."""
    out = []
    for m in messages:
        m = dict(m)
        if "reasoning_content" in m:
            m["reasoning"] = m["reasoning_content"]
        out.append(m)
    return out
