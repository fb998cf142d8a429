"""A loopback endpoint's record and a LangChain agent state that ends in a tool result.

Shared by the LangChain prompt-id tests (unit: streamed; integration: over HTTP).
"""

from __future__ import annotations

from typing import Any

from phaseaware.endpoints import EndpointRecord

FILLER = "The harbor ledger lists amber crates and timber in the valley warehouse. "
NOTES = "\n\n".join(f"{FILLER * 3}The code of vault V{k} is {4000 + k}-A." for k in range(3))


def loopback_record(tok: Any, server: str) -> EndpointRecord:
    """The record of a loopback server that names itself ``server`` (offset 0)."""
    return EndpointRecord(
        base_url="http://127.0.0.1:9/v1", model="sim-model", offset=0, offsets=(0,),
        mode="count", stability="constant", date="2026-12-05T00:00:00Z", tokenizer_spec=tok.spec,
        tokenizer_fingerprint=tok.fingerprint(), chat_format="deepseek-v4", probes=3,
        tool_version="test", server=server,
    )  # fmt: skip


def tool_result_state() -> dict[str, Any]:
    """A question, the model's search call and its result (``NOTES``)."""
    from langchain_core.messages import AIMessage, HumanMessage, ToolMessage

    call = {"name": "search", "args": {"q": "V0"}, "id": "call_1", "type": "tool_call"}
    return {
        "messages": [
            HumanMessage("What is the code of vault V0?", id="h1"),
            AIMessage(content="", tool_calls=[call], id="a1"),
            ToolMessage(content=NOTES, tool_call_id="call_1", id="t1"),
        ]
    }
