"""A LlamaIndex FunctionAgent whose tool results are aligned: PhaseAwareAgentLLM, offline.

The agent's LLM is LlamaIndex's ``OpenAILike`` wrapped in ``PhaseAwareAgentLLM``; it
talks over HTTP to a small OpenAI-compatible server started here on 127.0.0.1. The
shipped reference model emits no tool calls, so this server is a scripted stand-in
model: it renders each request with the DeepSeek-V4 chat format and tokenizer (so
``usage.prompt_tokens`` is real and the usage check runs), calls ``search_notes``
once per vault, and then answers with the code it reads in the LAST tool result it
was sent. Every tool result is aligned before the call (append alignment: earlier
bytes unchanged, positions absolute); the script prints the answers against the
expected codes, the placement of the top evidence (aligned vs appended as is) and
exits 1 when anything is wrong.

    PYTHONPATH=integrations/llama-index-llms python examples/llama_index_agent.py
"""

from __future__ import annotations

import asyncio
import json
import re
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

from example_cli import needs

with needs():
    import threading
    from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

    from llama_index.core.agent.workflow import FunctionAgent
    from llama_index.core.retrievers import BaseRetriever
    from llama_index.core.schema import NodeWithScore, QueryBundle, TextNode
    from llama_index.llms.openai_like import OpenAILike
    from llama_index.llms.phaseaware import (
        NodeRegistry,
        PhaseAwareAgentLLM,
        retriever_tool,
    )

    from phaseaware import AssemblyOptions, Chunk, assemble_append
    from phaseaware.chat import get_chat_format, parse_messages
    from phaseaware.tokenizers import load_tokenizer

VAULTS = {"Kestrel": "4417-C", "Osprey": "9082-A", "Juniper": "1650-F"}
FILLER = (
    "The harbor ledger lists amber crates, copper cable and timber held in the valley "
    "warehouse, with the quarry parcels logged by the north gate each morning. "
)
TOKENIZER = load_tokenizer("deepseek-v4")
FORMAT = get_chat_format("deepseek-v4", TOKENIZER)


class Notes(BaseRetriever):
    """Four notes per query: the asked vault's code first, three decoys."""

    def _retrieve(self, query_bundle: QueryBundle) -> list[NodeWithScore]:
        vault = next((v for v in VAULTS if v in query_bundle.query_str), "Kestrel")
        others = [v for v in VAULTS if v != vault] + ["Marlow"]
        nodes = []
        for k, name in enumerate([vault, *others[:3]]):
            code = VAULTS.get(name, "7301-B")
            text = f"{FILLER * (3 + k)}The access code of vault {name} is {code}. {FILLER}"
            node = TextNode(text=text, id_=f"{vault}-{k}", metadata={"evidence": [code]})
            nodes.append(NodeWithScore(node=node, score=round(0.9 - 0.15 * k, 2)))
        return nodes


def _reply(messages: list[dict[str, Any]]) -> dict[str, Any]:
    """The stand-in model: one search per question, then the code from the last result."""
    question = next(m["content"] for m in reversed(messages) if m["role"] == "user")
    vault = next(v for v in VAULTS if v in question)
    last = messages[-1]
    if last["role"] != "tool":
        call = {"id": f"call_{vault}", "type": "function",
                "function": {"name": "search_notes", "arguments": json.dumps({"query": vault})}}  # fmt: skip
        return {"role": "assistant", "content": "", "tool_calls": [call]}
    found = re.search(rf"vault {vault} is (\d{{4}}-[A-Z])", str(last["content"]))
    return {"role": "assistant", "content": found.group(1) if found else "unknown"}


class Handler(BaseHTTPRequestHandler):
    def do_POST(self) -> None:  # noqa: N802 (http.server's name)
        body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
        messages = body["messages"]
        prompt = FORMAT.render(parse_messages(messages), add_generation_prompt=True)
        self.server.prompts.append(prompt)  # type: ignore[attr-defined]
        reply = _reply(messages)
        payload = {
            "id": "x", "object": "chat.completion", "created": 0, "model": "stand-in",
            "choices": [{"index": 0, "message": reply, "logprobs": None,
                         "finish_reason": "tool_calls" if reply.get("tool_calls") else "stop"}],
            "usage": {"prompt_tokens": len(TOKENIZER.encode(prompt)), "completion_tokens": 1,
                      "total_tokens": len(TOKENIZER.encode(prompt)) + 1},
        }  # fmt: skip
        data = json.dumps(payload).encode()
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def log_message(self, *args: Any) -> None:
        pass


@contextmanager
def stand_in_server() -> Iterator[tuple[str, list[str]]]:
    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    server.prompts = []  # type: ignore[attr-defined]
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}/v1", server.prompts  # type: ignore[attr-defined]
    finally:
        server.shutdown()
        server.server_close()


def main() -> int:
    registry = NodeRegistry()
    tool = retriever_tool(Notes(), registry, name="search_notes", description="Search vault notes.")
    failures = 0
    with stand_in_server() as (base_url, prompts):
        inner = OpenAILike(model="stand-in", api_base=base_url, api_key="unused",
                           is_chat_model=True, is_function_calling_model=True, max_retries=0)  # fmt: skip
        llm = PhaseAwareAgentLLM(
            llm=inner, tokenizer=TOKENIZER, chat_format="deepseek-v4",
            profile="deepseek-v4-flash-base", budget_tokens=32_000, registry=registry,
            check_usage="raise", tool_schemas="not_rendered",
        )  # fmt: skip
        agent = FunctionAgent(tools=[tool], llm=llm, streaming=False,
                              system_prompt="Answer with the vault's access code only.")  # fmt: skip
        for vault, expected in VAULTS.items():
            answer = str(asyncio.run(_ask(agent, f"What is the access code of vault {vault}?")))
            ok = answer.strip() == expected
            failures += not ok
            report = llm.last_report or {}
            top = min(report.get("placements", []), key=lambda p: p["rank"], default=None)
            if top is None:
                print(f"{vault}: no aligned tool result")
                failures += 1
                continue
            as_is = _as_is_accuracy(vault)
            print(f"{vault}: answer {answer.strip()!r} (expected {expected!r}) {'OK' if ok else 'WRONG'}; "
                  f"top evidence at token {top['key_token_positions'][0]}, residue {top['residues'][0]}, "
                  f"expected accuracy {top['expected_accuracy']:.3f} aligned vs {as_is:.3f} as is")  # fmt: skip
        # each question is one run: the call with the tool result resends the first call's bytes
        stable = all(b.startswith(a) for a, b in zip(prompts[0::2], prompts[1::2], strict=True))
    print(f"{len(prompts)} requests; the bytes sent before each tool result unchanged: {stable}")
    failures += not stable
    return 1 if failures else 0


async def _ask(agent: FunctionAgent, question: str) -> Any:
    return await agent.run(user_msg=question)


def _as_is_accuracy(vault: str) -> float:
    """The same documents appended as is at the same place (for comparison)."""
    nodes = Notes().retrieve(vault)
    sent = [{"role": "system", "content": "Answer with the vault's access code only."},
            {"role": "user", "content": f"What is the access code of vault {vault}?"},
            _reply([{"role": "user", "content": vault}])]  # fmt: skip
    result = assemble_append(
        sent=sent, new={"role": "tool", "tool_call_id": f"call_{vault}", "content": "{context}"},
        chunks=[Chunk(text=n.node.get_content(), score=n.score or 0.0, id=n.node.node_id,
                      evidence=tuple(n.node.metadata["evidence"])) for n in nodes],
        tokenizer=TOKENIZER, chat_format="deepseek-v4", question=vault,
        profile="deepseek-v4-flash-base", budget_tokens=32_000,
        options=AssemblyOptions(strategy="none", pad=False, repeat=False, length_pad=False),
    )  # fmt: skip
    top = min(result.placements, key=lambda p: p.rank)
    return top.expected_accuracy or 0.0


if __name__ == "__main__":
    sys.exit(main())
