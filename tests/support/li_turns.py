"""LlamaIndex chat turns of a tool loop: a tool call block, its result, a parallel turn.

Shared by the LlamaIndex agent tests (unit: refuse, tool results; the vLLM tier).
"""

from __future__ import annotations

from typing import Any


def tool_call(call_id: str, name: str, query: str = "vault") -> Any:
    """A ``ToolCallBlock`` of ``name`` with arguments ``{"q": query}``."""
    from llama_index.core.base.llms.types import ToolCallBlock

    return ToolCallBlock(tool_call_id=call_id, tool_name=name, tool_kwargs={"q": query})


def tool_result(call_id: str, text: str) -> Any:
    """The tool message answering ``call_id`` with ``text``."""
    from llama_index.core.llms import ChatMessage

    return ChatMessage(role="tool", content=text, additional_kwargs={"tool_call_id": call_id})


def parallel_turns(question: str, page: str, query: str = "vault") -> list[Any]:
    """``question``, then one assistant turn with two calls (``search``, ``fetch_page``)
    and their two results: ``"alpha\\n\\nbeta"`` and ``page``."""
    from llama_index.core.base.llms.types import TextBlock
    from llama_index.core.llms import ChatMessage

    calls = [tool_call("c1", "search", query), tool_call("c2", "fetch_page", query)]
    return [
        ChatMessage(role="user", content=question),
        ChatMessage(role="assistant", blocks=[TextBlock(text="Looking."), *calls]),
        tool_result("c1", "alpha\n\nbeta"),
        tool_result("c2", page),
    ]
