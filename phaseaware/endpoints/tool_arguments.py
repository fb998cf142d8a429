"""How a server hands an assistant tool call's ``arguments`` to an ``hf`` Jinja template.

vLLM, SGLang and llama.cpp's ``llama-server`` parse them into a JSON object before
rendering; llama-cpp-python passes the JSON text as it came. The two render different
bytes in a template that writes the arguments, so ``probe-endpoint`` measures which one
the server uses: one request holding a tool call and its result, whose counted prompt
tokens match phaseaware's render of one form and not the other
(:func:`tool_arguments_of`). The record keeps the answer (``tool_arguments``) and every
plan for that endpoint renders with it.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

from phaseaware.chat import ChatSettings, get_chat_format, parse_messages
from phaseaware.endpoints.prompts import ProbePrompt
from phaseaware.errors import PhaseawareError
from phaseaware.tokenizers.base import Tokenizer

__all__ = ["TOOL_HISTORY", "tool_arguments_of"]

#: The probe: one tool call (arguments that render differently as text and as an object).
TOOL_HISTORY: tuple[dict[str, Any], ...] = (
    {"role": "user", "content": "What is the weather in Paris?"},
    {"role": "assistant", "content": "", "tool_calls": [{
        "id": "call_0", "type": "function",
        "function": {"name": "get_weather", "arguments": '{"city": "Paris", "unit": "C"}'},
    }]},
    {"role": "tool", "tool_call_id": "call_0", "content": "12 C, light rain."},
)  # fmt: skip


def _probe(tok: Tokenizer, settings: ChatSettings) -> ProbePrompt | None:
    try:
        text = get_chat_format("hf", tok, settings=settings).render(parse_messages(TOOL_HISTORY))
    except PhaseawareError:  # a template that cannot take this form (or no tool calls)
        return None
    return ProbePrompt(units=0, text=text, messages=None, ids=tuple(tok.encode(text)))


def tool_arguments_of(
    tok: Tokenizer,
    *,
    thinking: bool,
    offsets: Sequence[int],
    count: Callable[[tuple[dict[str, Any], ...]], int],
) -> str | None:
    """``"object"`` or ``"string"``: the form whose render the server counted (``count``:
    ``usage.prompt_tokens`` of one request with these messages; ``offsets``: the tokens
    the server adds), ``None`` when the template writes both alike (nothing to tell) or
    renders only one of them, or the count matches neither."""
    forms = {
        form: _probe(tok, ChatSettings(thinking=thinking, tool_arguments=form))
        for form in ("object", "string")
    }
    found = {form: p for form, p in forms.items() if p is not None}
    if len(found) < 2 or found["object"].text == found["string"].text:
        return None
    lengths = {form: len(p.ids) for form, p in found.items()}
    if lengths["object"] == lengths["string"]:
        return None  # different bytes, same count: a count cannot tell them apart
    counted = count(TOOL_HISTORY)
    matched = [form for form, n in lengths.items() if any(counted == n + o for o in offsets)]
    return matched[0] if len(matched) == 1 else None
