"""The LlamaIndex adapters state the chat settings they planned with on each chat call."""

from __future__ import annotations

from typing import Any

import pytest

pytest.importorskip("llama_index.core")

from llama_index.core.base.llms.types import ChatMessage, ChatResponse  # noqa: E402
from llama_index.core.llms import MockLLM  # noqa: E402
from llama_index.core.prompts import PromptTemplate  # noqa: E402
from llama_index.core.schema import NodeWithScore, TextNode  # noqa: E402
from llama_index.postprocessor.phaseaware import PhaseAwareSynthesizer  # noqa: E402

from phaseaware.chat import ChatSettings  # noqa: E402

MAX = ChatSettings(thinking=True, reasoning_effort="max")


class KwargsMock(MockLLM):
    """A chat MockLLM that keeps each call's kwargs and reports no usage."""

    @property
    def metadata(self):  # type: ignore[override]
        meta = super().metadata
        meta.is_chat_model = True
        return meta

    def chat(self, messages: Any, **kwargs: Any) -> ChatResponse:  # type: ignore[override]
        self.__dict__.setdefault("calls", []).append(kwargs)
        return ChatResponse(message=ChatMessage(role="assistant", content="x"), raw={})


@pytest.mark.parametrize(
    ("chat_format", "settings", "expected"),
    [
        ("deepseek-v4", MAX, {"extra_body": {"chat_template_kwargs": MAX.chat_template_kwargs("deepseek-v4")}}),
        ("chatml", None, {}),
    ],
)  # fmt: skip
def test_synthesizer_states_the_settings(chat_format: str, settings: Any, expected: Any) -> None:
    llm = KwargsMock()
    synth = PhaseAwareSynthesizer(
        llm=llm, tokenizer="deepseek-v4", chat_format=chat_format, budget_tokens=600,
        profile="deepseek-v4-flash-base", settings=settings,
        text_qa_template=PromptTemplate("{context_str}\n\n{query_str}"),
    )  # fmt: skip
    nodes = [NodeWithScore(node=TextNode(text="Below 3.1 V it stops.", id_="n0"), score=1.0)]
    synth.synthesize("Which voltage?", nodes=nodes)
    assert llm.__dict__["calls"] == [expected]
