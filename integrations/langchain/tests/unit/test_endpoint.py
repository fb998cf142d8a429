"""Endpoint records in the LangChain adapter: offset, fingerprint refusal, usage check, robust."""

from __future__ import annotations

import uuid
import warnings
from pathlib import Path
from typing import Any

import pytest
from langchain_core.messages import AIMessage, HumanMessage, SystemMessage
from langchain_core.outputs import ChatGeneration, LLMResult
from langchain_core.prompts import ChatPromptTemplate
from langchain_phaseaware import (
    PhaseAwareCompressor,
    PhaseAwareMiddleware,
    PhaseAwarePrompt,
    PhaseAwareUsageCheck,
)
from langchain_phaseaware.convert import message_dicts
from langchain_phaseaware.usage import planned_prompt_tokens

from phaseaware.assembly.inputs.options import AssemblyOptions
from phaseaware.chat.formats import get_chat_format
from phaseaware.chat.messages import parse_messages
from phaseaware.endpoints import EndpointRecord, save_endpoint_record
from phaseaware.errors import (
    FingerprintMismatchError,
    InputError,
    PhaseawareWarning,
    PromptTokenDriftError,
)
from phaseaware.tokenizers import load_tokenizer

OPTIONS = AssemblyOptions(allow_tokenizer_mismatch=True)
PROFILE = "deepseek-v4-flash-base"
QUESTION = "Below which voltage is a Helios-3 module disabled?"
TEMPLATE = ChatPromptTemplate.from_messages(
    [("system", "Answer from the notes.\n{context}"), ("human", "{question}")]
)


def _record(tok: Any, offsets: tuple[int, ...] = (1,), **kw: Any) -> EndpointRecord:
    fields: dict[str, Any] = dict(
        base_url="http://127.0.0.1:9/v1", model="m", offset=offsets[0], offsets=offsets,
        mode="count", stability="constant" if len(offsets) == 1 else "varying",
        date="2026-12-03T00:00:00Z", tokenizer_spec=tok.spec,
        tokenizer_fingerprint=tok.fingerprint(), chat_format="chatml", probes=3,
        tool_version="test",
    )  # fmt: skip
    fields.update(kw)
    return EndpointRecord(**fields)


def _prompt(o200k: Any, **kw: Any) -> PhaseAwarePrompt:
    return PhaseAwarePrompt(
        TEMPLATE, tokenizer=o200k, chat_format="chatml", profile=PROFILE, budget_tokens=2000,
        options=OPTIONS, **kw,
    )  # fmt: skip


def _inputs(docs: list[Any]) -> dict[str, Any]:
    return {"question": QUESTION, "documents": docs}


def test_record_offset_equals_position_offset(o200k, make_documents, tmp_path: Path):
    path = save_endpoint_record(_record(o200k), directory=tmp_path)
    docs = make_documents()
    by_record = _prompt(o200k, endpoint=str(path)).place(_inputs(docs))
    by_offset = _prompt(o200k, position_offset=1).place(_inputs(docs))
    assert by_record.result.position_offset == 1
    assert by_record.report() == by_offset.report()
    assert by_record.value == by_offset.value
    # {"base_url", "model"} finds the stored record in the user's endpoint folder
    save_endpoint_record(_record(o200k))
    named = _prompt(o200k, endpoint={"base_url": "http://127.0.0.1:9/v1", "model": "m"})
    assert named.target.options.position_offset == 1 and named.target.endpoint == _record(o200k)
    # an explicit offset that agrees is fine; one that disagrees names both
    assert _prompt(o200k, endpoint=path, position_offset=1).target.options.position_offset == 1
    with pytest.raises(InputError, match=r"offset 2.*offset 1"):
        _prompt(o200k, endpoint=str(path), position_offset=2)


def test_record_of_another_tokenizer_is_refused(o200k, make_documents, tmp_path: Path):
    other = load_tokenizer("tiktoken:cl100k_base")
    path = save_endpoint_record(_record(other), directory=tmp_path)
    with pytest.raises(FingerprintMismatchError, match="fingerprint"):
        _prompt(o200k, endpoint=str(path))
    with pytest.raises(FingerprintMismatchError):
        PhaseAwareMiddleware(
            tokenizer=o200k, chat_format="chatml", profile=PROFILE, budget_tokens=2000,
            endpoint=str(path),
        )  # fmt: skip
    with pytest.raises(FingerprintMismatchError):
        PhaseAwareUsageCheck(tokenizer=o200k, chat_format="chatml", endpoint=str(path))
    with pytest.raises(FingerprintMismatchError):
        PhaseAwareCompressor(
            tokenizer=o200k, profile=PROFILE, budget_tokens=2000, prefix="", endpoint=str(path)
        )


def _result(reported: int) -> LLMResult:
    usage = {"input_tokens": reported, "output_tokens": 1, "total_tokens": reported + 1}
    message = AIMessage("3.32 volts", usage_metadata=usage)  # type: ignore[arg-type]
    return LLMResult(generations=[[ChatGeneration(message=message)]])


def _run(check: PhaseAwareUsageCheck, messages: list[Any], reported: int) -> None:
    run_id = uuid.uuid4()
    check.on_chat_model_start({}, [messages], run_id=run_id)
    check.on_llm_end(_result(reported), run_id=run_id)


def test_usage_check_expects_the_record_offset(o200k):
    messages = [SystemMessage("Be brief."), HumanMessage(QUESTION)]
    planned = planned_prompt_tokens(
        messages, tokenizer=o200k, chat_format=get_chat_format("chatml", o200k)
    )
    seen: list[Any] = []
    check = PhaseAwareUsageCheck(
        tokenizer=o200k, chat_format="chatml", endpoint=_record(o200k, (3,)),
        on_mismatch="raise", on_check=seen.append,
    )  # fmt: skip
    _run(check, messages, planned + 3)
    assert seen[-1].ok and seen[-1].offset == 3
    with pytest.raises(PromptTokenDriftError, match="drift \\+2"):
        _run(check, messages, planned + 5)
    warning = PhaseAwareUsageCheck(
        tokenizer=o200k, chat_format="chatml", endpoint=_record(o200k, (3,))
    )
    with pytest.warns(
        PhaseawareWarning, match=r"set position_offset=4"
    ):  # the parameter is position_offset=
        _run(warning, messages, planned + 4)
    varying = PhaseAwareUsageCheck(
        tokenizer=o200k, chat_format="chatml", endpoint=_record(o200k, (1, 2, 3)),
        on_mismatch="raise",
    )  # fmt: skip
    for d in (1, 2, 3):
        _run(varying, messages, planned + d)
    with pytest.raises(PromptTokenDriftError, match="offset one of \\[1, 2, 3\\]"):
        _run(varying, messages, planned + 4)
    with pytest.raises(InputError, match="offset 2.*offset 3"):
        PhaseAwareUsageCheck(
            tokenizer=o200k, chat_format="chatml", position_offset=2, endpoint=_record(o200k, (3,))
        )


def test_varying_record_turns_on_robust_placement(o200k, make_documents):
    record = _record(o200k, (1, 2, 3))
    placed = _prompt(o200k, endpoint=record).place(_inputs(make_documents()))
    assert placed.result.robust is not None and placed.result.robust.offsets == (1, 2, 3)
    report = placed.report()
    assert report["robust"]["worst_case_accuracy"] == placed.result.robust.worst_case_accuracy
    assert all(p["residues"] is None for p in report["placements"])  # no single residue known
    compressor = PhaseAwareCompressor(
        tokenizer=o200k, profile=PROFILE, budget_tokens=2000, prefix_tokens=4,
        options=OPTIONS, endpoint=record,
    )  # fmt: skip
    out = compressor.compress_documents(make_documents(), QUESTION)
    summary = out[0].metadata["phaseaware"]["assembly"]
    assert summary["robust"]["offsets"] == [5, 6, 7]  # the server's, then the prefix's tokens
    assert out[0].metadata["phaseaware"]["placement"]["residues"] is None


def test_middleware_checks_usage_against_the_record(o200k, make_documents):
    from langchain.agents.middleware import ModelRequest, ModelResponse
    from langchain_core.messages import ToolMessage
    from langchain_openai import ChatOpenAI

    docs = make_documents(3)
    tool = ToolMessage(
        content="\n\n".join(d.page_content for d in docs), artifact=docs,
        tool_call_id="call-1", name="search", id="tool-1",
    )  # fmt: skip
    call = {"name": "search", "args": {"query": "helios"}, "id": "call-1"}
    history = [HumanMessage(QUESTION, id="h-1"), AIMessage("", tool_calls=[call], id="a-1"), tool]
    model = ChatOpenAI(base_url="http://127.0.0.1:9/v1", api_key="unused", model="m")
    request = ModelRequest(model=model, messages=history, system_message=SystemMessage("Brief."))

    def handler(extra: int) -> Any:
        def call_model(sent: ModelRequest) -> ModelResponse:
            msgs = [sent.system_message, *sent.messages]
            text = get_chat_format("chatml", o200k).render(
                parse_messages(message_dicts(msgs)), add_generation_prompt=True
            )
            n = len(o200k.encode(text)) + extra
            usage = {"input_tokens": n, "output_tokens": 1, "total_tokens": n + 1}
            return ModelResponse(result=[AIMessage("3.32", usage_metadata=usage)])

        return call_model

    middleware = PhaseAwareMiddleware(
        tokenizer=o200k, chat_format="chatml", profile=PROFILE, budget_tokens=2000,
        options=OPTIONS, endpoint=_record(o200k, (2,)), check_usage="raise",
    )  # fmt: skip
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        middleware.wrap_model_call(request, handler(2))
    with pytest.raises(PromptTokenDriftError, match="drift -2"):
        middleware.wrap_model_call(request, handler(0))
