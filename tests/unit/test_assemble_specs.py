"""``assemble`` takes the same spec strings as ``assemble_conversation`` (tokenizer spec,
chat format name, profile name) and gives the byte-identical result of the objects."""

from __future__ import annotations

import pytest

from phaseaware import assemble
from phaseaware.errors import TemplateError
from phaseaware.profiles.registry import get_profile
from phaseaware.templates import get_layout
from phaseaware.tokenizers import load_tokenizer

CHUNKS = ["The access code for Alice is 123.", "Rivers flow to the sea.", "Bob likes tea."]
QUESTION = "What is the access code for Alice?"


@pytest.mark.parametrize("layout", ["deepseek-v4", "chatml", "none"])
def test_spec_strings_equal_the_objects(layout):
    tok = load_tokenizer("deepseek-v4")
    by_spec = assemble(
        CHUNKS, tokenizer="deepseek-v4", layout=layout, question=QUESTION,
        profile="deepseek-v4-flash-base", budget_tokens=400,
    )  # fmt: skip
    by_object = assemble(
        CHUNKS, tokenizer=tok, layout=get_layout(layout, tok), question=QUESTION,
        profile=get_profile("deepseek-v4-flash-base"), budget_tokens=400,
    )  # fmt: skip
    assert by_spec.prompt == by_object.prompt
    assert by_spec.to_dict() == by_object.to_dict()


def test_a_bad_chat_format_name_is_a_typed_error():
    with pytest.raises(TemplateError, match="deepseek-v4"):
        assemble(CHUNKS, tokenizer="deepseek-v4", layout="nope", question="q", budget_tokens=400)
