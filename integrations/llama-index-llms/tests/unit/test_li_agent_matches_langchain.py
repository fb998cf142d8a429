"""The LlamaIndex agent wrapper and the LangChain middleware take the same agent steps.

Both call the kit's agent step (:mod:`phaseaware.integrate.agent`). Fed the same tool
loop (the same system prompt, questions, tool calls, tool results with the same
documents, scores, ids and evidence, bound tools), step after step, they must send the
same prompt, place the same chunks at the same token positions, and put the same
placement report on the aligned tool message; both leave alone a step whose last
message is no tool result, and both send parallel tool results unaligned, warning once.
"""

from __future__ import annotations

import json
import warnings
from typing import Any

import pytest

pytest.importorskip("langchain_phaseaware")
pytest.importorskip("langchain.agents")
pytest.importorskip("llama_index.llms.openai_like")

from hypothesis import given, settings  # noqa: E402
from hypothesis import strategies as st  # noqa: E402
from langchain.agents.middleware import ModelRequest  # noqa: E402
from langchain_core.documents import Document  # noqa: E402
from langchain_core.messages import AIMessage, HumanMessage, SystemMessage, ToolMessage  # noqa: E402
from langchain_openai import ChatOpenAI  # noqa: E402
from langchain_phaseaware import PhaseAwareMiddleware  # noqa: E402
from llama_index.core.base.llms.types import TextBlock, ToolCallBlock  # noqa: E402
from llama_index.core.llms import ChatMessage  # noqa: E402
from llama_index.core.schema import NodeWithScore, TextNode  # noqa: E402
from llama_index.llms.openai_like import OpenAILike  # noqa: E402
from llama_index.llms.phaseaware import NodeRegistry, PhaseAwareAgentLLM  # noqa: E402

from phaseaware.integrate import ParallelToolResultsWarning  # noqa: E402
from phaseaware.tokenizers import load_tokenizer  # noqa: E402

TOKENIZER = load_tokenizer("deepseek-v4")
SYSTEM = "You are a research agent. Cite codes."
TOOL = {
    "type": "function",
    "function": {
        "name": "search",
        "description": "Search the vault archive.",
        "parameters": {"type": "object", "properties": {"q": {"type": "string"}}},
    },
}
WORDS = "amber harbor ledger north gate copper cable valley timber river signal".split()
COMMON: dict[str, Any] = dict(
    tokenizer=TOKENIZER, chat_format="deepseek-v4", profile="deepseek-v4-flash-base",
    budget_tokens=60_000, message_template="Results:\n{context}",
)  # fmt: skip


def _doc(rng: Any, step: int, k: int) -> tuple[str, float | None, str, str]:
    code = f"{1000 + 37 * step + k}-{'ABCDEFGH'[k % 8]}"
    words = " ".join(rng.choice(WORDS) for _ in range(rng.randint(20, 60)))
    text = f"{words.capitalize()}. The code of vault V{step}-{k} is {code}. {words}."
    score = None if rng.random() < 0.3 else round(rng.random(), 3)
    return text, score, f"id-{step}-{k}", code


class Both:
    """One conversation, kept in each framework's own types."""

    def __init__(self, **extra: Any) -> None:
        self.middleware = PhaseAwareMiddleware(**COMMON, **extra)
        self.registry = NodeRegistry()
        inner = OpenAILike(model="m", api_base="http://127.0.0.1:9/v1", api_key="x",
                           is_chat_model=True, is_function_calling_model=True)  # fmt: skip
        self.llm = PhaseAwareAgentLLM(llm=inner, registry=self.registry, **COMMON, **extra)
        self.lc: list[Any] = []
        self.li: list[ChatMessage] = [ChatMessage(role="system", content=SYSTEM)]

    def user(self, text: str) -> None:
        self.lc.append(HumanMessage(text, id=f"h{len(self.lc)}"))
        self.li.append(ChatMessage(role="user", content=text))

    def call(self, step: int, calls: int = 1) -> None:
        ids = [f"call_{step}_{c}" for c in range(calls)]
        lc_calls = [{"name": "search", "args": {"q": f"V{step}"}, "id": i} for i in ids]
        self.lc.append(AIMessage(f"Searching {step}.", tool_calls=lc_calls, id=f"a{step}"))
        blocks: list[Any] = [TextBlock(text=f"Searching {step}.")]
        blocks += [ToolCallBlock(tool_call_id=i, tool_name="search", tool_kwargs={"q": f"V{step}"})
                   for i in ids]  # fmt: skip
        self.li.append(ChatMessage(role="assistant", blocks=blocks))

    def result(self, step: int, call: int, docs: list[tuple[str, float | None, str, str]]) -> None:
        call_id = f"call_{step}_{call}"
        documents = [
            Document(page_content=t, id=i, metadata={**({"score": s} if s is not None else {}),
                                                    "evidence": [e]})
            for t, s, i, e in docs
        ]  # fmt: skip
        text = "\n\n".join(t for t, _, _, _ in docs)
        self.lc.append(ToolMessage(content=text, artifact=documents, tool_call_id=call_id,
                                   name="search", id=f"t{step}_{call}"))  # fmt: skip
        nodes = [NodeWithScore(node=TextNode(text=t, id_=i, metadata={"evidence": [e]}), score=s)
                 for t, s, i, e in docs]  # fmt: skip
        self.registry.put(text, nodes)
        self.li.append(ChatMessage(role="tool", content=text,
                                   additional_kwargs={"tool_call_id": call_id}))  # fmt: skip

    def step(self) -> tuple[Any, Any]:
        model = ChatOpenAI(base_url="http://127.0.0.1:9/v1", api_key="unused", model="m")
        request = ModelRequest(model=model, messages=list(self.lc),
                               system_message=SystemMessage(SYSTEM), tools=[TOOL])  # fmt: skip
        _, aligned, lc_result = self.middleware.align(request)
        if aligned is not None:
            self.lc[-1] = aligned  # what the Command writes into the agent state
        sent, li_result = self.llm.align(self.li, tools=[TOOL])
        if lc_result is None or li_result is None:
            assert lc_result is None and li_result is None
            return None, None
        assert lc_result.prompt == li_result.prompt
        assert lc_result.placements == li_result.placements
        assert aligned is not None
        assert aligned.response_metadata["phaseaware"] == sent[-1].additional_kwargs["phaseaware"]
        assert aligned.content == sent[-1].content
        return lc_result, li_result

    def reply(self, step: int) -> None:
        self.lc.append(AIMessage(f"Found it ({step}).", id=f"r{step}"))
        self.li.append(ChatMessage(role="assistant", content=f"Found it ({step})."))


@settings(max_examples=4, deadline=None, derandomize=True)
@given(st.randoms(use_true_random=False), st.integers(min_value=2, max_value=4))
def test_the_same_loop_gives_the_same_steps(rng: Any, steps: int) -> None:
    both = Both()
    both.user("Collect the code of every vault.")
    assert both.step() == (None, None)  # no tool result: nothing to align
    for step in range(steps):
        both.call(step)
        both.result(step, 0, [_doc(rng, step, k) for k in range(rng.randint(1, 4))])
        lc, li = both.step()
        assert lc is not None and li is not None
        assert step == 0 or lc.append_path == li.append_path == "incremental"
        if step % 2:  # a new question between tool calls
            both.reply(step)
            both.user(f"Now also vault {json.dumps(step)}?")


def test_parallel_tool_results_are_sent_unaligned_by_both() -> None:
    import random

    rng = random.Random(3)
    both = Both()
    both.user("Collect two codes.")
    both.call(0, calls=2)
    both.result(0, 0, [_doc(rng, 0, 0)])
    both.result(0, 1, [_doc(rng, 0, 1)])
    with pytest.warns(ParallelToolResultsWarning) as caught:
        assert both.step() == (None, None)
    assert len(caught) == 2  # one per adapter


def test_both_take_the_full_path_under_the_drop_rule() -> None:
    """Thinking with DeepSeek's drop rule re-renders sent text: both adapters assemble the
    whole conversation (exact, ``append_path="full"``) instead of stopping the agent."""
    import random

    from phaseaware.assembly.conversation import PrefixRewriteWarning

    rng = random.Random(5)
    both = Both(thinking=True, tool_schemas="not_rendered")  # schemas keep reasoning
    both.user("Collect the code of vault V0.")
    for step in range(2):
        both.call(step)
        both.result(step, 0, [_doc(rng, step, k) for k in range(2)])
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", PrefixRewriteWarning)
            lc, li = both.step()
        assert lc.append_path == li.append_path == "full"
        assert "drop_thinking=False" in lc.append_reason
        assert lc.token_count == len(TOKENIZER.encode(lc.prompt))
