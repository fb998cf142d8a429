"""The Tokenizer protocol and its optional capabilities; a third-party tokenizer that has
only the base protocol works on the generic path (layouts, no registry)."""

from __future__ import annotations

import pytest

from phaseaware.chat import conversation_layout
from phaseaware.errors import TemplateError
from phaseaware.tokenizers import (
    BatchTokenizer,
    CharIndexTokenizer,
    ChatTemplateTokenizer,
    ParallelBatchTokenizer,
    Tokenizer,
)

CAPABILITIES = (BatchTokenizer, ParallelBatchTokenizer, CharIndexTokenizer, ChatTemplateTokenizer)


def test_minimal_tokenizer_has_the_base_protocol_only(minimal_tokenizer):
    assert isinstance(minimal_tokenizer, Tokenizer)
    assert not any(isinstance(minimal_tokenizer, cap) for cap in CAPABILITIES)


@pytest.mark.parametrize("name", ["none", "chatml"])
def test_minimal_tokenizer_renders_generic_layouts(minimal_tokenizer, name):
    layout = conversation_layout(tokenizer=minimal_tokenizer, chat_format=name, system="Be brief.")
    rendered = layout.render(system=None, context="The key is 42.", question="Key?")
    prefix, suffix = layout.split(system=None, question="Key?")
    assert rendered.text == prefix + "The key is 42." + suffix
    tokenized = minimal_tokenizer.tokenize(rendered.text)
    first = tokenized.token_at_char(rendered.context_start)
    assert minimal_tokenizer.decode(list(tokenized.ids[first : first + 3])) == "The key"


def test_minimal_tokenizer_bos_goes_first(minimal_tokenizer):
    with_bos = type(minimal_tokenizer)(bos_text="<s>")
    assert conversation_layout(tokenizer=with_bos, chat_format="none").render(
        system=None, context="C", question="Q"
    ).text == ("<s>C\n\nQ")
    assert conversation_layout(tokenizer=minimal_tokenizer, chat_format="chatml").split(
        system=None, question="Q"
    )[0] == ("<|im_start|>user\n")


def test_hf_layout_needs_the_chat_template_capability(minimal_tokenizer):
    with pytest.raises(TemplateError, match="'minimal' has no chat template"):
        conversation_layout(tokenizer=minimal_tokenizer, chat_format="hf")


def test_builtin_adapters_declare_their_capabilities(cl100k, deepseek_v4):
    for tokenizer in (cl100k, deepseek_v4):
        assert isinstance(tokenizer, BatchTokenizer)
        assert isinstance(tokenizer, ParallelBatchTokenizer)
    assert cl100k.parallel_batch is False and deepseek_v4.parallel_batch is True
    assert isinstance(cl100k, CharIndexTokenizer) and not isinstance(
        deepseek_v4, CharIndexTokenizer
    )
    assert not isinstance(cl100k, ChatTemplateTokenizer)  # tiktoken has no chat template
    assert isinstance(deepseek_v4, ChatTemplateTokenizer) and deepseek_v4.chat_template is None
