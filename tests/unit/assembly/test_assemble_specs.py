"""``assemble`` takes the same spec strings as ``assemble(messages=...)`` (tokenizer spec,
chat format name, profile name) and gives the byte-identical result of the objects."""

from __future__ import annotations

import pytest

from phaseaware import assemble
from phaseaware.chat import get_chat_format
from phaseaware.errors import TemplateError
from phaseaware.profiles.registry import get_profile
from phaseaware.tokenizers import load_tokenizer

CHUNKS = ["The access code for Alice is 123.", "Rivers flow to the sea.", "Bob likes tea."]
QUESTION = "What is the access code for Alice?"


@pytest.mark.parametrize("chat_format", ["deepseek-v4", "chatml", "none"])
def test_spec_strings_equal_the_objects(chat_format):
    tok = load_tokenizer("deepseek-v4")
    by_spec = assemble(
        CHUNKS, tokenizer="deepseek-v4", chat_format=chat_format, question=QUESTION,
        profile="deepseek-v4-flash-base", budget_tokens=400,
    )  # fmt: skip
    by_object = assemble(
        CHUNKS, tokenizer=tok, chat_format=get_chat_format(chat_format, tok), question=QUESTION,
        profile=get_profile("deepseek-v4-flash-base"), budget_tokens=400,
    )  # fmt: skip
    assert by_spec.prompt == by_object.prompt
    assert by_spec.to_dict() == by_object.to_dict()


def test_a_bad_chat_format_name_is_a_typed_error():
    with pytest.raises(TemplateError, match="deepseek-v4"):
        assemble(
            CHUNKS, tokenizer="deepseek-v4", chat_format="nope", question="q", budget_tokens=400
        )
