"""PhaseAwareCompressor (exact under its stated conditions) and PhaseAwareUsageCheck."""

from __future__ import annotations

import asyncio
import uuid
import warnings
from typing import Any

import pytest
from langchain_core.documents.compressor import BaseDocumentCompressor
from langchain_core.messages import AIMessage, HumanMessage, SystemMessage
from langchain_core.outputs import ChatGeneration, LLMResult
from langchain_phaseaware import PhaseAwareCompressor, PhaseAwareUsageCheck

from phaseaware.errors import InputError, PhaseawareWarning, PromptTokenDriftError

QUESTION = "Below which voltage is a Helios-3 module disabled?"
PREFIX = "<|im_start|>system\nAnswer from the notes.\n"
SUFFIX = "<|im_end|>\n<|im_start|>user\n" + QUESTION + "<|im_end|>\n<|im_start|>assistant\n"


def _compressor(o200k: Any, options: Any, profile_name: str, **kw: Any) -> PhaseAwareCompressor:
    kw.setdefault("prefix", PREFIX)
    return PhaseAwareCompressor(
        tokenizer=o200k, profile=profile_name, budget_tokens=2000, suffix=SUFFIX,
        options=options, **kw,
    )  # fmt: skip


def test_compressed_documents_joined_are_the_exact_prompt(
    o200k, options, profile_name, make_documents
):
    docs = make_documents(5)
    before = [d.model_copy(deep=True) for d in docs]
    compressor = _compressor(o200k, options, profile_name)
    assert isinstance(compressor, BaseDocumentCompressor)
    out = compressor.compress_documents(docs, QUESTION)
    assert docs == before  # originals untouched
    assert sorted(d.id for d in out) == sorted(d.id for d in docs)
    prompt = PREFIX + "\n\n".join(d.page_content for d in out) + SUFFIX
    measured = o200k.tokenize(prompt)
    for doc in out:
        original = next(d for d in docs if d.id == doc.id)
        assert original.page_content in doc.page_content  # pad + text verbatim
        report = doc.metadata.pop("phaseaware")
        assert doc.metadata == original.metadata  # metadata preserved
        placement = report["placement"]
        assert report["assembly"]["token_count"] == len(measured)
        for pos, char in zip(
            placement["key_token_positions"], placement["key_char_offsets"], strict=True
        ):
            assert measured.token_at_char(char) == pos
            assert prompt[char:].startswith(original.metadata["evidence"])


def test_prefix_tokens_shift_residues(o200k, options, profile_name, make_documents):
    count = len(o200k.encode(PREFIX))
    compressor = _compressor(o200k, options, profile_name, prefix=None, prefix_tokens=count)
    out = compressor.compress_documents(make_documents(3), QUESTION)
    for doc in out:
        placement = doc.metadata["phaseaware"]["placement"]
        assert doc.metadata["phaseaware"]["assembly"]["position_offset"] == count
        assert placement["residues"] == [(t + count) % 8 for t in placement["key_token_positions"]]
        assert doc.metadata["phaseaware"]["assembly"]["exact_prefix"] is False


def test_compressor_empty_async_and_errors(o200k, options, profile_name, make_documents):
    compressor = _compressor(o200k, options, profile_name)
    assert compressor.compress_documents([], QUESTION) == []
    docs = make_documents(3)
    assert asyncio.run(compressor.acompress_documents(docs, QUESTION)) == (
        compressor.compress_documents(docs, QUESTION)
    )
    with pytest.raises(InputError, match="exactly one of prefix"):
        _compressor(o200k, options, profile_name, prefix=None)
    with pytest.raises(InputError, match="exactly one of prefix"):
        _compressor(o200k, options, profile_name, prefix_tokens=3)
    with pytest.raises(InputError, match="document_separator"):
        _compressor(o200k, options, profile_name, separator="\n---\n")


def _result(usage: dict[str, int] | None, llm_output: dict[str, Any] | None = None) -> LLMResult:
    message = AIMessage("3.32 volts", usage_metadata=usage)  # type: ignore[arg-type]
    return LLMResult(generations=[[ChatGeneration(message=message)]], llm_output=llm_output)


def _run(check: PhaseAwareUsageCheck, messages: list[Any], response: LLMResult) -> None:
    run_id = uuid.uuid4()
    check.on_chat_model_start({}, [messages], run_id=run_id)
    check.on_llm_end(response, run_id=run_id)


def test_usage_check_compares_with_the_rendered_prompt(o200k):
    from phaseaware.chat.formats import get_chat_format
    from phaseaware.chat.messages import parse_messages

    messages = [SystemMessage("Be brief."), HumanMessage(QUESTION)]
    text = get_chat_format("chatml", o200k).render(
        parse_messages(
            [{"role": "system", "content": "Be brief."}, {"role": "user", "content": QUESTION}]
        )
    )
    planned = len(o200k.encode(text))
    seen: list[Any] = []
    check = PhaseAwareUsageCheck(tokenizer=o200k, chat_format="chatml", on_check=seen.append)
    usage = {"input_tokens": planned, "output_tokens": 2, "total_tokens": planned + 2}
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        _run(check, messages, _result(usage))
    assert seen[-1].ok and seen[-1].planned_tokens == planned
    # llm_output["token_usage"] when the message carries no usage_metadata
    with pytest.warns(PhaseawareWarning, match="drift \\+5"):
        _run(check, messages, _result(None, {"token_usage": {"prompt_tokens": planned + 5}}))
    assert seen[-1].drift == 5
    with pytest.warns(PhaseawareWarning, match="drift \\+3"):
        _run(check, messages, _result({**usage, "input_tokens": planned + 3}))
    raising = PhaseAwareUsageCheck(
        tokenizer=o200k, chat_format="chatml", position_offset=1, on_mismatch="raise"
    )
    with pytest.raises(PromptTokenDriftError, match="offset 1"):
        _run(raising, messages, _result(usage))
    _run(raising, messages, _result(None))  # no usage: nothing to check
    assert len(raising._plans) == 0  # per-run state is dropped at the end
    with pytest.raises(InputError, match="on_mismatch"):
        PhaseAwareUsageCheck(tokenizer=o200k, chat_format="chatml", on_mismatch="loud")  # type: ignore[arg-type]


def test_usage_check_plans_bound_tools(o200k):
    import uuid as _uuid

    from phaseaware.chat import UnsupportedSettingError
    from phaseaware.tokenizers import load_tokenizer

    tool = {"type": "function", "function": {"name": "search", "parameters": {}}}
    messages = [HumanMessage(QUESTION)]
    params = {"invocation_params": {"tools": [tool]}}
    with pytest.raises(UnsupportedSettingError, match="tool_schemas='not_rendered'"):
        PhaseAwareUsageCheck(tokenizer=o200k, chat_format="chatml").on_chat_model_start(
            {}, [messages], run_id=_uuid.uuid4(), **params
        )
    seen: list[Any] = []
    dsv4 = load_tokenizer("deepseek-v4")
    for tools, schemas in (([tool], "rendered"), ([], "rendered"), ([tool], "not_rendered")):
        check = PhaseAwareUsageCheck(
            tokenizer=dsv4,
            chat_format="deepseek-v4",
            on_check=seen.append,
            tool_schemas=schemas,
            on_mismatch="ignore",
        )
        run_id = _uuid.uuid4()
        check.on_chat_model_start({}, [messages], run_id=run_id, invocation_params={"tools": tools})
        check.on_llm_end(
            _result({"input_tokens": 1, "output_tokens": 1, "total_tokens": 2}), run_id=run_id
        )
    with_tools, without, ignored = (c.planned_tokens for c in seen[-3:])
    assert with_tools > without == ignored


def test_usage_check_skips_a_call_it_cannot_render(o200k):
    """A model-made call with arguments that are not JSON (``invalid_tool_calls``, which
    ``ChatOpenAI`` sends): the prompt cannot be planned, so this call goes unchecked with
    one warning naming the cause; the model call itself is never stopped, and a mismatch
    is never claimed (before: planned without that call)."""
    from langchain_core.messages import InvalidToolCall

    invalid = InvalidToolCall(id="c1", name="search", args='{"q": ', error="not JSON")
    messages = [HumanMessage(QUESTION), AIMessage("", invalid_tool_calls=[invalid]),
                HumanMessage("And again?")]  # fmt: skip
    seen: list[Any] = []
    check = PhaseAwareUsageCheck(
        tokenizer=o200k, chat_format="chatml", on_mismatch="raise", on_check=seen.append
    )
    with pytest.warns(PhaseawareWarning, match=r"not checked: message 1: tool_calls\[0\]"):
        _run(check, messages, _result({"input_tokens": 7, "output_tokens": 1, "total_tokens": 8}))
    assert seen == [] and len(check._plans) == 0
