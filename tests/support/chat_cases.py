"""Chat inputs the server tiers share: one bound tool and one tool-call history."""

from __future__ import annotations

import json
from typing import Any

#: A tool with a description and a parameters object, which vLLM and llama.cpp pass alike.
WEATHER_TOOL: dict[str, Any] = {
    "type": "function",
    "function": {
        "name": "get_weather",
        "description": "The current weather of a city.",
        "parameters": {
            "type": "object",
            "properties": {"city": {"type": "string", "description": "City name"}},
            "required": ["city"],
        },
    },
}

#: An assistant tool call (non-ASCII arguments) and its result after a system message.
TOOL_HISTORY: list[dict[str, Any]] = [
    {"role": "system", "content": "Use the tools."},
    {"role": "user", "content": "Weather in Köln?"},
    {"role": "assistant", "content": "", "tool_calls": [{
        "id": "call_1", "type": "function",
        "function": {"name": "get_weather", "arguments": json.dumps({"city": "Köln"})},
    }]},
    {"role": "tool", "tool_call_id": "call_1", "content": "12 °C, light rain."},
]  # fmt: skip
