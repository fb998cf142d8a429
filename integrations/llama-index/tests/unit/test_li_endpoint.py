"""Endpoint records in the LlamaIndex adapter: offset, fingerprint refusal, usage check, robust."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

pytest.importorskip("transformers")

from llama_index.core import PromptTemplate  # noqa: E402
from llama_index.core.base.llms.types import ChatMessage, ChatResponse  # noqa: E402
from llama_index.core.llms import MockLLM  # noqa: E402
from llama_index.core.schema import NodeWithScore, TextNode  # noqa: E402
from llama_index.postprocessor.phaseaware import (  # noqa: E402
    PhaseAwarePostprocessor,
    PhaseAwareSynthesizer,
    phaseaware_query_engine,
)

from phaseaware.endpoints import EndpointRecord, save_endpoint_record  # noqa: E402
from phaseaware.errors import (  # noqa: E402
    FingerprintMismatchError,
    InputError,
    PhaseawareWarning,
    PromptTokenDriftError,
)
from phaseaware.tokenizers import load_tokenizer  # noqa: E402

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
        return ChatResponse(
            message=ChatMessage(role="assistant", content="317"),
            raw={"usage": {"prompt_tokens": self.reported}},
        )


@pytest.fixture(scope="module")
def ref() -> Any:
    return load_tokenizer("reference")


def _record(tok: Any, offsets: tuple[int, ...] = (1,)) -> EndpointRecord:
    return EndpointRecord(
        base_url="http://127.0.0.1:9/v1", model="m", offset=offsets[0], offsets=offsets,
        mode="count", stability="constant" if len(offsets) == 1 else "varying",
        date="2026-12-03T00:00:00Z", tokenizer_spec=tok.spec,
        tokenizer_fingerprint=tok.fingerprint(), chat_format="hf", probes=3,
        tool_version="test",
    )  # fmt: skip


def _nodes() -> list[NodeWithScore]:
    texts = [
        "river waits . The access code for Priya is 317 . A late tower rests .",
        "station fades . The access code for Hugo is 204 . One green lamp rests .",
        "lamp glows . The access code for Mina is 581 . A quiet field rests .",
    ]
    return [
        NodeWithScore(node=TextNode(text=t, id_=f"n{i}"), score=1.0 - i / 10)
        for i, t in enumerate(texts)
    ]


def _post(profile: Path, **kw: Any) -> PhaseAwarePostprocessor:
    return PhaseAwarePostprocessor(
        tokenizer="reference", chat_format="hf", profile=profile, budget_tokens=512,
        messages=[{"role": "user", "content": "{context}\n\n{question}"}], **kw,
    )  # fmt: skip


def _synth(llm: Any, profile: Path, **kw: Any) -> PhaseAwareSynthesizer:
    return PhaseAwareSynthesizer(
        llm=llm, tokenizer="reference", chat_format="hf", profile=profile, budget_tokens=512,
        text_qa_template=QA, **kw,
    )  # fmt: skip


def test_record_offset_equals_position_offset(ref, reference_profile_path, tmp_path: Path):
    path = save_endpoint_record(_record(ref), directory=tmp_path)
    by_record = _post(reference_profile_path, endpoint=str(path)).plan(_nodes())
    by_offset = _post(reference_profile_path, options={"position_offset": 1}).plan(_nodes())
    assert by_record is not None and by_offset is not None
    assert by_record.result.position_offset == 1
    assert by_record.result.to_dict() == by_offset.result.to_dict()
    assert [n.node.metadata for n in by_record.nodes] == [n.node.metadata for n in by_offset.nodes]
    save_endpoint_record(_record(ref))  # the user's folder: found by (base_url, model)
    named = _post(reference_profile_path, endpoint={"base_url": "http://127.0.0.1:9/v1/",
                                                    "model": "m"})  # fmt: skip
    assert named.target.options.position_offset == 1 and named.target.endpoint == _record(ref)
    with pytest.raises(InputError, match=r"offset 2.*offset 1"):
        _post(reference_profile_path, endpoint=path, options={"position_offset": 2})
    with pytest.raises(InputError, match=r"offset 2.*offset 1"):
        _synth(ChatMock(), reference_profile_path, endpoint=path, position_offset=2)


def test_record_of_another_tokenizer_is_refused(reference_profile_path, tmp_path: Path):
    other = load_tokenizer("tiktoken:cl100k_base")
    path = save_endpoint_record(_record(other), directory=tmp_path)
    with pytest.raises(FingerprintMismatchError, match="fingerprint"):
        _post(reference_profile_path, endpoint=str(path))
    with pytest.raises(FingerprintMismatchError):
        _synth(ChatMock(), reference_profile_path, endpoint=str(path))


def test_usage_check_accepts_the_record_offset_and_raises_on_drift(ref, reference_profile_path):
    llm = ChatMock()
    synth = _synth(llm, reference_profile_path, endpoint=_record(ref, (2,)), on_mismatch="raise")
    planned = synth.postprocessor().postprocess_nodes(_nodes(), query_str=QUESTION)
    tokens = planned[0].node.metadata["phaseaware_assembly"]["token_count"]
    llm.reported = tokens + 2
    synth.synthesize(QUESTION, planned)
    sent = synth.last_sent
    assert sent is not None and not sent.replanned  # the postprocessor planned the same
    assert sent.check is not None and sent.check.ok and sent.check.offset == 2
    llm.reported = tokens + 3
    with pytest.raises(PromptTokenDriftError, match="position_offset=3"):
        synth.synthesize(QUESTION, planned)
    warn = _synth(llm, reference_profile_path, endpoint=_record(ref, (2,)))
    with pytest.warns(PhaseawareWarning, match="drift \\+1"):
        warn.synthesize(QUESTION, _nodes())


def test_varying_record_turns_on_robust_placement(ref, reference_profile_path):
    record = _record(ref, (1, 2, 3))
    llm = ChatMock()
    synth = _synth(llm, reference_profile_path, endpoint=record, on_mismatch="raise")
    planned = synth.postprocessor().postprocess_nodes(_nodes(), query_str=QUESTION)
    assembly = planned[0].node.metadata["phaseaware_assembly"]
    assert assembly["robust"]["offsets"] == [1, 2, 3]  # the report's one shape: to_dict()
    assert assembly["robust"]["worst_case_accuracy"] is not None  # the claim: worst case
    assert all(n.node.metadata["phaseaware_placement"]["residues"] is None for n in planned)
    for d in (1, 2, 3):  # any offset of the record is no drift
        llm.reported = assembly["token_count"] + d
        synth.synthesize(QUESTION, planned)
    llm.reported = assembly["token_count"] + 4
    with pytest.raises(PromptTokenDriftError, match="offset one of \\[1, 2, 3\\]"):
        synth.synthesize(QUESTION, planned)


def test_query_engine_passes_the_record_to_both(ref, reference_profile_path):
    from llama_index.core.retrievers import BaseRetriever

    class Fixed(BaseRetriever):
        def _retrieve(self, query_bundle):  # type: ignore[no-untyped-def, override]
            return _nodes()

    llm = ChatMock()
    engine = phaseaware_query_engine(
        Fixed(), llm=llm, tokenizer="reference", chat_format="hf",
        profile=reference_profile_path, budget_tokens=512, endpoint=_record(ref, (1,)),
        text_qa_template=QA, on_mismatch="raise",
    )  # fmt: skip
    from llama_index.core.schema import QueryBundle

    last = engine._node_postprocessors[-1]
    plan = last.plan(_nodes(), QueryBundle(QUESTION))  # type: ignore[attr-defined]
    llm.reported = plan.result.token_count + 1
    response = engine.query(QUESTION)
    sent = response.metadata["phaseaware"]
    assert not sent.replanned and sent.position_offset == 1 and sent.check.ok
