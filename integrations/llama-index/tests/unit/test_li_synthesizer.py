"""PhaseAwareSynthesizer without a network: the conversation LlamaIndex would send,
re-planning stale nodes, the usage check, and configuration errors.

The LLM here is LlamaIndex's own ``MockLLM`` (echoes nothing, reports no usage) or
a subclass that reports usage; the end-to-end tests use a real server.
"""

from __future__ import annotations

import warnings

import pytest

pytest.importorskip("transformers")

from llama_index.core import PromptTemplate  # noqa: E402
from llama_index.core.base.llms.types import ChatMessage, ChatResponse  # noqa: E402
from llama_index.core.llms import MockLLM  # noqa: E402
from llama_index.core.prompts.chat_prompts import CHAT_TEXT_QA_PROMPT  # noqa: E402
from llama_index.core.schema import NodeWithScore, TextNode  # noqa: E402
from llama_index.postprocessor.phaseaware import (  # noqa: E402
    PhaseAwareSynthesizer,
    text_qa_conversation,
)

from phaseaware.errors import InputError, PhaseawareWarning, PromptTokenDriftError  # noqa: E402

QUESTION = "What is the access code for Priya ?"
QA = PromptTemplate("{context_str}\n\n{query_str}")


class ChatMock(MockLLM):
    """MockLLM as a chat model that reports ``usage.prompt_tokens = reported``."""

    reported: int = 0

    @property
    def metadata(self):  # type: ignore[override]
        meta = super().metadata
        meta.is_chat_model = True
        return meta

    def chat(self, messages, **kwargs):  # type: ignore[override]
        self.__dict__.setdefault("seen", []).append(list(messages))
        return ChatResponse(
            message=ChatMessage(role="assistant", content="317"),
            raw={"usage": {"prompt_tokens": self.reported}},
        )


def _nodes():
    texts = [
        "river waits . The access code for Priya is 317 . A late tower rests .",
        "station fades . The access code for Hugo is 204 . One green lamp rests .",
    ]
    return [
        NodeWithScore(node=TextNode(text=t, id_=f"n{i}"), score=1.0 - i / 10)
        for i, t in enumerate(texts)
    ]


def _synth(llm, **kw):
    return PhaseAwareSynthesizer(
        llm=llm, tokenizer="reference", chat_format="hf", budget_tokens=512,
        text_qa_template=kw.pop("template", QA), **kw,
    )  # fmt: skip


def test_conversation_is_what_llama_index_would_send():
    llm = ChatMock(system_prompt="Answer with the number only.")
    ours = text_qa_conversation(CHAT_TEXT_QA_PROMPT, llm=llm)
    theirs = llm._get_messages(CHAT_TEXT_QA_PROMPT, context_str="{context}", query_str="{question}")
    assert ours == [{"role": m.role.value, "content": m.content} for m in theirs]
    assert ours[0] == {"role": "system", "content": "Answer with the number only."}


def test_completion_llm_conversation_includes_system_and_query_wrapper():
    from llama_index.llms.openai_like import OpenAILike

    llm = OpenAILike(
        model="m", api_base="http://127.0.0.1:9/v1", api_key="x", is_chat_model=False,
        system_prompt="SYS", query_wrapper_prompt=PromptTemplate("<w>{query_str}</w>"),
    )  # fmt: skip
    (message,) = text_qa_conversation(QA, llm=llm)
    assert message == {"role": "user", "content": "<w>SYS\n\n{context}\n\n{question}</w>"}
    theirs = llm._extend_prompt(QA.format(llm=llm, context_str="{context}", query_str="{question}"))
    assert message["content"] == theirs  # what LLM.predict would send to complete()


def test_sends_the_planned_messages_and_checks_usage():
    llm = ChatMock()
    synth = _synth(llm, on_mismatch="raise")
    planned = synth.postprocessor().postprocess_nodes(_nodes(), query_str=QUESTION)
    llm.reported = planned[0].node.metadata["phaseaware_assembly"]["token_count"]
    response = synth.synthesize(QUESTION, planned)
    assert str(response) == "317"
    sent = synth.last_sent
    assert not sent.replanned and sent.check.ok
    (seen,) = llm.seen
    assert [{"role": m.role.value, "content": m.content} for m in seen] == list(sent.messages)
    llm.reported += 1  # the server counts one token more than planned
    with pytest.raises(PromptTokenDriftError, match="position_offset=1"):
        synth.synthesize(QUESTION, planned)


def test_usage_mismatch_warns_by_default():
    llm = ChatMock()
    llm.reported = 3
    synth = _synth(llm)
    with pytest.warns(PhaseawareWarning, match="drift"):
        synth.synthesize(QUESTION, _nodes())


def test_reordered_nodes_are_planned_again_with_a_warning():
    llm = ChatMock()
    synth = _synth(llm, on_mismatch="ignore")
    planned = synth.postprocessor().postprocess_nodes(_nodes(), query_str=QUESTION)
    with pytest.warns(PhaseawareWarning, match="reordered"):
        synth.synthesize(QUESTION, list(reversed(planned)))
    assert synth.last_sent.replanned
    # The re-plan starts from the chunk texts (pads removed), not the padded segments.
    assert synth.last_sent.messages == tuple(
        planned[0].node.metadata["phaseaware_assembly"]["messages"]
    )


def test_plain_nodes_are_planned_without_a_warning():
    synth = _synth(ChatMock(), on_mismatch="ignore")
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        synth.synthesize(QUESTION, _nodes())
    assert synth.last_sent.replanned


def test_no_nodes_is_the_empty_response():
    assert str(_synth(ChatMock()).synthesize(QUESTION, [])) == "Empty Response"


def test_chat_llm_with_plain_format_names_the_fix():
    with pytest.raises(InputError, match="chat format"):
        PhaseAwareSynthesizer(
            llm=ChatMock(), tokenizer="reference", chat_format="none", budget_tokens=512
        )


def test_template_with_literal_placeholder_is_rejected():
    with pytest.raises(InputError, match="literally"):
        text_qa_conversation(PromptTemplate("{context_str} {{question}} {query_str}"), llm=None)


def test_parts_built_separately_with_defaults_agree():
    """RetrieverQueryEngine(node_postprocessors=[PhaseAwarePostprocessor(...)],
    response_synthesizer=PhaseAwareSynthesizer(...)) with the default text-QA prompt."""
    from llama_index.postprocessor.phaseaware import PhaseAwarePostprocessor

    llm = ChatMock()
    common = {"tokenizer": "reference", "chat_format": "chatml", "budget_tokens": 512}
    postprocessor = PhaseAwarePostprocessor(**common)
    synth = PhaseAwareSynthesizer(llm=llm, on_mismatch="ignore", **common)
    planned = postprocessor.postprocess_nodes(_nodes(), query_str=QUESTION)
    synth.synthesize(QUESTION, planned)
    assert not synth.last_sent.replanned
    assert synth.last_sent.messages[0]["role"] == "system"  # LlamaIndex's QA system prompt


class StreamMock(ChatMock):
    """ChatMock that streams its answer in pieces, usage on a last chunk of its own (as an
    OpenAI-compatible server does with ``stream_options.include_usage``)."""

    def stream_chat(self, messages, **kwargs):  # type: ignore[override]
        self.__dict__.setdefault("seen", []).append(list(messages))
        pieces = ["3", "1", "7"]

        def gen():
            text = ""
            for piece in pieces:
                text += piece
                yield ChatResponse(
                    message=ChatMessage(role="assistant", content=text), delta=piece, raw={}
                )
            yield ChatResponse(
                message=ChatMessage(role="assistant", content=text), delta="",
                raw={"usage": {"prompt_tokens": self.reported}},
            )  # fmt: skip

        return gen()

    async def astream_chat(self, messages, **kwargs):  # type: ignore[override]
        sync = self.stream_chat(messages, **kwargs)

        async def agen():
            for item in sync:
                yield item

        return agen()


@pytest.mark.parametrize("mode", ["sync", "async"])
def test_streaming_sends_the_plan_and_checks_usage_at_the_end(mode):
    import asyncio

    from llama_index.core.base.response.schema import AsyncStreamingResponse, StreamingResponse

    llm = StreamMock()
    synth = _synth(llm, on_mismatch="raise", streaming=True)
    planned = synth.postprocessor().postprocess_nodes(_nodes(), query_str=QUESTION)
    llm.reported = planned[0].node.metadata["phaseaware_assembly"]["token_count"]

    async def drain(response):
        return "".join([t async for t in response.async_response_gen()])

    if mode == "sync":
        response = synth.synthesize(QUESTION, planned)
        assert isinstance(response, StreamingResponse)
        assert response.metadata["phaseaware"].check is None  # not ended yet
        assert "".join(response.response_gen) == "317"
    else:
        response = asyncio.run(synth.asynthesize(QUESTION, planned))
        assert isinstance(response, AsyncStreamingResponse)
        assert asyncio.run(drain(response)) == "317"
    sent = response.metadata["phaseaware"]
    assert sent is synth.last_sent and sent.check is not None and sent.check.ok
    (seen,) = llm.seen
    assert [{"role": m.role.value, "content": m.content} for m in seen] == list(sent.messages)
    llm.reported += 2
    again = synth.synthesize(QUESTION, planned)
    with pytest.raises(PromptTokenDriftError, match="drift \\+2"):
        "".join(again.response_gen)


def test_query_engine_streams():
    from llama_index.core.base.response.schema import StreamingResponse
    from llama_index.core.retrievers import BaseRetriever
    from llama_index.postprocessor.phaseaware import phaseaware_query_engine

    class Fixed(BaseRetriever):
        def _retrieve(self, query_bundle):  # type: ignore[no-untyped-def, override]
            return _nodes()

    engine = phaseaware_query_engine(
        Fixed(), llm=StreamMock(), tokenizer="reference", chat_format="hf", profile=None,
        budget_tokens=512, text_qa_template=QA, on_mismatch="ignore", streaming=True,
    )  # fmt: skip
    response = engine.query(QUESTION)
    assert isinstance(response, StreamingResponse)
    assert "".join(response.response_gen) == "317"
    assert not response.metadata["phaseaware"].replanned


def test_none_and_ill_typed_nodes_are_input_errors():
    synth = _synth(ChatMock(), on_mismatch="ignore")
    bad = NodeWithScore.model_construct(node=TextNode(text="a", id_="n0"), score="0.9")
    with pytest.raises(InputError, match=r"nodes\[1\] is a NoneType"):
        synth.synthesize(QUESTION, [_nodes()[0], None])
    with pytest.raises(InputError, match=r"nodes\[0\] has score '0.9'"):
        synth.synthesize(QUESTION, [bad])
