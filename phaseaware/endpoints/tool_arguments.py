"""How a server hands an assistant tool call's ``arguments`` to an ``hf`` Jinja template.

vLLM, SGLang and llama.cpp's ``llama-server`` parse them into a JSON object before
rendering; llama-cpp-python passes the JSON text as it came. The two render different
bytes in a template that writes the arguments, so ``probe-endpoint`` measures which one
the server uses: one request holding a tool call and its result, whose counted prompt
tokens match phaseaware's render of one form and not the other
(:func:`tool_argument_lengths`, then :func:`matched_form`). The record keeps the answer
(``tool_arguments``) and every plan for that endpoint renders with it.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from phaseaware.chat import ChatSettings, get_chat_format, parse_messages
from phaseaware.errors import PhaseawareError
from phaseaware.tokenizers.base import Tokenizer

__all__ = ["TOOL_HISTORY", "matched_form", "tool_argument_lengths"]

#: The probe: one tool call (arguments that render differently as text and as an object).
TOOL_HISTORY: tuple[dict[str, Any], ...] = (
    {"role": "user", "content": "What is the weather in Paris?"},
    {"role": "assistant", "content": "", "tool_calls": [{
        "id": "call_0", "type": "function",
        "function": {"name": "get_weather", "arguments": '{"city": "Paris", "unit": "C"}'},
    }]},
    {"role": "tool", "tool_call_id": "call_0", "content": "12 C, light rain."},
)  # fmt: skip


def tool_argument_lengths(tok: Tokenizer, *, thinking: bool) -> dict[str, int] | None:
    """Tokens of :data:`TOOL_HISTORY` as the ``hf`` format renders it with each form
    (``{"object": n, "string": m}``); ``None`` when a count cannot tell the forms apart:
    the template writes both alike (or as many tokens), or cannot take one of them."""
    lengths = {}
    for form in ("object", "string"):
        settings = ChatSettings(thinking=thinking, tool_arguments=form)
        try:
            text = get_chat_format("hf", tok, settings=settings).render(
                parse_messages(TOOL_HISTORY)
            )
        except PhaseawareError:  # a template that cannot take this form (or no tool calls)
            return None
        lengths[form] = len(tok.encode(text))
    return lengths if lengths["object"] != lengths["string"] else None


def matched_form(lengths: Mapping[str, int], *, counted: int, offsets: Sequence[int]) -> str | None:
    """The one form whose length plus an offset is the server's count (``None``: neither
    or both)."""
    matched = [form for form, n in lengths.items() if any(counted == n + o for o in offsets)]
    return matched[0] if len(matched) == 1 else None
