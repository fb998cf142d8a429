"""Which form of tool-call arguments a server's count matches (lengths, then the match)."""

from __future__ import annotations

from pathlib import Path

import pytest

from phaseaware.chat import ChatSettings, get_chat_format, parse_messages
from phaseaware.endpoints.tool_arguments import (
    TOOL_HISTORY,
    matched_form,
    tool_argument_lengths,
)
from phaseaware.tokenizers import load_tokenizer
from tests.support.optional import SMOLLM2_MISSING
from tests.support.smollm2 import smollm2_gguf, template, tokenizer_folder


@pytest.fixture(scope="module")
def qwen(tmp_path_factory: pytest.TempPathFactory):
    if smollm2_gguf() is None:
        pytest.skip(SMOLLM2_MISSING)
    folder = tokenizer_folder(Path(tmp_path_factory.mktemp("qwen")), template("qwen2_5"))
    return load_tokenizer(f"hf:{folder}")


def _count(tok, form: str) -> int:
    settings = ChatSettings(tool_arguments=form)
    text = get_chat_format("hf", tok, settings=settings).render(parse_messages(TOOL_HISTORY))
    return len(tok.encode(text))


def test_lengths_are_each_forms_render(qwen):
    lengths = tool_argument_lengths(qwen, thinking=False)
    assert lengths == {"object": _count(qwen, "object"), "string": _count(qwen, "string")}
    assert lengths["object"] != lengths["string"]


@pytest.mark.parametrize("form", ["object", "string"])
@pytest.mark.parametrize("offset", [0, 2])
def test_the_form_whose_count_the_server_reports_is_found(qwen, form, offset):
    lengths = tool_argument_lengths(qwen, thinking=False)
    assert lengths is not None
    counted = lengths[form] + offset
    assert matched_form(lengths, counted=counted, offsets=(offset,)) == form


def test_a_count_matching_neither_form_or_both_finds_nothing():
    assert matched_form({"object": 10, "string": 13}, counted=20, offsets=(0,)) is None
    assert matched_form({"object": 10, "string": 13}, counted=13, offsets=(0, 3)) is None


def test_a_template_that_ignores_tool_calls_cannot_be_told_apart():
    gguf = smollm2_gguf()
    if gguf is None:
        pytest.skip(SMOLLM2_MISSING)
    smollm2 = load_tokenizer(f"hf:{gguf}")  # its template writes contents only
    assert tool_argument_lengths(smollm2, thinking=False) is None
