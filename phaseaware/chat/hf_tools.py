"""Tools as a server hands them to a Jinja chat template (the ``hf`` format's ``tools``).

A template that renders tools writes what it is given, often whole (``tool | tojson``),
so the exact dicts matter, key order included. Both servers pass the request's
``tools`` to the template as ``tools=[...]``, each parsed by their request schema:

- vLLM 0.32: ``tool.model_dump()`` of ``ChatCompletionToolsParam``: ``{"type",
  "function": {"name", "description", "parameters"}}`` in that order; a missing
  ``description``/``parameters`` becomes ``None``; ``strict`` and ``defer_loading``
  are kept when set; other keys are dropped.
- llama-cpp-python 0.3.36: the request's ``tools`` validated by its ``TypedDict``
  schema: the same keys in the same order; a missing ``description`` stays missing,
  a missing ``parameters`` is refused (HTTP 422), ``strict`` is dropped, other keys too.

:func:`template_tools` gives that common form, and refuses (with the fix) a tool whose
rendering would depend on the server: no ``description`` or ``parameters`` (give
both), or ``strict``/``defer_loading`` set (leave them out). No tools: ``None``, what
both servers pass for a request without tools.

An assistant turn's tool calls reach the template with ``arguments`` parsed into a JSON
object by vLLM (``renderers/chat_utils.py: _postprocess_messages``), SGLang and
llama.cpp's ``llama-server``; llama-cpp-python passes the JSON text as sent.
:func:`template_message` gives either form.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from phaseaware.chat.messages import Message
from phaseaware.chat.settings import UnsupportedSettingError

__all__ = ["template_message", "template_tools"]

_SERVER_DEPENDENT = ("strict", "defer_loading")  # vLLM keeps them, llama-cpp-python drops them


def _function(index: int, tool: Mapping[str, Any]) -> dict[str, Any]:
    function = tool["function"]
    where = f"tools[{index}] ({function['name']!r})"
    kept = [k for k in _SERVER_DEPENDENT if function.get(k) is not None]
    if tool.get("defer_loading") is not None and "defer_loading" not in kept:
        kept.append("defer_loading")  # vLLM copies it into the function
    if kept:
        raise UnsupportedSettingError(
            f"{where} sets {', '.join(kept)}: vLLM passes it to the chat template and "
            "llama-cpp-python drops it, so the prompt depends on the server; leave it out "
            "(e.g. bind_tools(..., strict=None))"
        )
    if not isinstance(function.get("description"), str):
        raise UnsupportedSettingError(
            f"{where} has no description: vLLM passes a missing one to the chat template as "
            "null and llama-cpp-python leaves it out; give the tool a description"
        )
    if not isinstance(function.get("parameters"), Mapping):
        raise UnsupportedSettingError(
            f"{where} has no parameters object: give one (an empty object schema "
            '{"type": "object", "properties": {}} for a tool without arguments)'
        )
    return {k: function[k] for k in ("name", "description", "parameters")}


def template_tools(tools: Sequence[Mapping[str, Any]]) -> list[dict[str, Any]] | None:
    """``tools`` (checked OpenAI tool schemas, ``ChatSettings.tools``) as the template
    receives them from vLLM and llama-cpp-python alike (see the module docstring)."""
    if not tools:
        return None
    return [{"type": "function", "function": _function(i, t)} for i, t in enumerate(tools)]


def template_message(message: Message, *, object_arguments: bool) -> dict[str, Any]:
    """``message`` as the server hands it to a Jinja template: the OpenAI-style dict, tool
    calls' ``arguments`` parsed into a JSON object when ``object_arguments``."""
    out = message.to_openai()
    if object_arguments and message.tool_calls:
        out["tool_calls"] = [
            {**call.to_openai(), "function": {"name": call.name,
                                              "arguments": call.parsed_arguments()}}
            for call in message.tool_calls
        ]  # fmt: skip
    return out
