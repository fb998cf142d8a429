"""assemble(messages=...) over random and real-shaped conversations, confirmed independently.

Every claimed position is re-derived from an independent render (the reference
renderers of ``test_chat_properties``: DeepSeek's official V4 encoding
transliterated, ChatML and plain text written out) and a fresh tokenization of
that text: the chunk texts and evidence sit at the claimed characters, each key
token contains its key character, and residues are the positions mod the period.
"""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from phaseaware import AssemblyOptions, Chunk, assemble, get_profile
from phaseaware.assembly.report.result import AssemblyResult
from phaseaware.chat.formats import format_markers
from phaseaware.tokenizers.base import Tokenizer
from phaseaware.tokenizers.control import scanner_for
from tests.unit.chat.test_chat_properties import conversations, fill, neutralize, reference_render

FORMATS = ("none", "chatml", "deepseek-v4")
PROFILE = get_profile("deepseek-v4-flash-base")
# tiktoken tokenizers borrow the DeepSeek profile's residue table (planning still runs)
OPTIONS = AssemblyOptions(allow_tokenizer_mismatch=True)
FAST = settings(
    max_examples=30,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.filter_too_much],
)


@pytest.fixture(scope="module")
def tokenizers(cl100k: Tokenizer, o200k: Tokenizer, deepseek_v4: Tokenizer) -> dict[str, Tokenizer]:
    return {"cl100k": cl100k, "o200k": o200k, "deepseek-v4": deepseek_v4}


def confirm(
    result: AssemblyResult,
    messages: list[dict[str, Any]],
    chunks: list[Chunk],
    *,
    question: str,
    chat_format: str,
    tokenizer: Tokenizer,
) -> None:
    """Every claim of ``result`` re-derived from an independent render and tokenization."""
    # message text and the question are untrusted: control strings in them are broken
    # before rendering
    scanner = scanner_for(tokenizer, markers=format_markers(chat_format))
    cleaned_question = scanner.clean(question, where="")[0]
    filled = fill(neutralize(messages, scanner), result.context, cleaned_question, scanner)
    text = reference_render(chat_format, filled, tokenizer.bos_text, False)
    assert result.prompt == text
    if chat_format != "none":
        assert [dict(m) for m in result.messages or ()] == filled
    ids = tokenizer.encode(text)
    assert result.token_count == len(ids)
    by_id = {c.id: c for c in chunks}
    for p in result.placements:
        chunk = by_id[p.chunk_id]
        assert text[p.char_start : p.char_end] == chunk.text
        assert result.context.count(chunk.text) >= 1
        for t, c, r in zip(p.key_token_positions, p.key_char_offsets, p.residues, strict=True):
            assert r == t % PROFILE.period
            assert any(text.startswith(e, c) for e in chunk.evidence)
            before, through = tokenizer.decode(ids[:t]), tokenizer.decode(ids[: t + 1])
            if "\ufffd" not in before + through:  # whole characters: check by decoding
                assert text.startswith(before) and text.startswith(through)
                assert len(before) <= c < len(through)
            else:  # a multi-byte character split across tokens: fall back to offsets
                tokenized = tokenizer.tokenize(text)
                assert tokenized.token_at_char(c) == t


_WORDS = st.sampled_from(
    ["alpha", "Zürich", "naïve", "東京", "данные", "ok.", "—", "🙂", "policy", "code", "\n", "42"]
)


@st.composite
def chunk_sets(draw: st.DrawFn) -> list[Chunk]:
    chunks = []
    for i in range(draw(st.integers(1, 4))):
        left = " ".join(draw(st.lists(_WORDS, min_size=0, max_size=30)))
        right = " ".join(draw(st.lists(_WORDS, min_size=0, max_size=10)))
        key = f"KX{i}{draw(st.sampled_from(['7731', 'Ω9', 'qa']))}"
        chunks.append(
            Chunk(
                text=f"{left} the key is {key}. {right}".strip(),
                score=draw(st.floats(0, 1)),
                id=f"c{i}",
                evidence=(key,),
            )
        )
    return chunks


@pytest.mark.parametrize("name", ["cl100k", "o200k", "deepseek-v4"])
@FAST
@given(
    messages=conversations(),
    chunks=chunk_sets(),
    question=st.text(max_size=20),
    chat_format=st.sampled_from(FORMATS),
)
def test_random_conversations_place_exactly(
    tokenizers, name, messages, chunks, question, chat_format
):
    tokenizer = tokenizers[name]
    result = assemble(
        chunks, messages=messages, tokenizer=tokenizer, chat_format=chat_format, question=question,
        profile=PROFILE, budget_tokens=6000, options=OPTIONS,
    )  # fmt: skip
    assert len(result.placements) == len(chunks)
    confirm(
        result, messages, chunks, question=question, chat_format=chat_format, tokenizer=tokenizer
    )


QUESTION = "Which gate code opens the Kestrel depot after 22:00?"
DOCS = [
    Chunk(
        text="Depot handbook. The Kestrel depot's night gate code is 4471-B; it changes "
        "every quarter and is issued by the security desk.",
        score=0.9,
        id="handbook",
        evidence=("4471-B",),
    ),
    Chunk(
        text="Security memo. After 22:00 only the night gate opens; the day gate code "
        "0093 stops working at closing time.",
        score=0.7,
        id="memo",
        evidence=("0093",),
    ),
    Chunk(
        text="Visitor rules: sign in at reception, wear a badge, and never share gate "
        "codes by e-mail or chat. 東京 office staff follow the same rules.",
        score=0.4,
        id="rules",
        evidence=("never share gate",),
    ),
]
LANGCHAIN_SHAPED = [  # ChatPromptTemplate: context in the system message, question last
    {
        "role": "system",
        "content": "You are an assistant for question-answering tasks. Use the following "
        "pieces of retrieved context to answer the question.\n\n{context}",
    },
    {"role": "user", "content": "{question}"},
]
SIX_TURNS = [
    {"role": "system", "content": "You answer from the documents only."},
    {"role": "user", "content": "Hi, I work nights at Kestrel."},
    {"role": "assistant", "content": "Hello! How can I help with the night shift?"},
    {"role": "user", "content": "Documents:\n{context}"},
    {"role": "assistant", "content": "Thanks, I have read them. What do you need?"},
    {"role": "user", "content": "{question} Quote the document."},
]


@pytest.mark.parametrize("name", ["cl100k", "o200k", "deepseek-v4"])
@pytest.mark.parametrize("chat_format", FORMATS)
@pytest.mark.parametrize("messages", [LANGCHAIN_SHAPED, SIX_TURNS], ids=["langchain", "6-turn"])
def test_langchain_shape_and_six_turns_assemble_exactly(tokenizers, name, chat_format, messages):
    tokenizer = tokenizers[name]
    result = assemble(
        DOCS, messages=messages, tokenizer=tokenizer, chat_format=chat_format, question=QUESTION,
        profile=PROFILE, budget_tokens=1500, options=OPTIONS,
    )  # fmt: skip
    assert {p.chunk_id for p in result.placements} == {c.id for c in DOCS}
    confirm(result, messages, DOCS, question=QUESTION, chat_format=chat_format, tokenizer=tokenizer)
    assert result.expected_accuracy is not None
    assert result.prompt.count(QUESTION) == 1


def test_the_shorthand_is_the_one_message_conversation(deepseek_v4):
    from phaseaware import assemble

    system = "You answer from the documents only."
    short = assemble(
        DOCS, tokenizer=deepseek_v4, chat_format="deepseek-v4",
        question=QUESTION, system=system, profile=PROFILE, budget_tokens=1500,
    )  # fmt: skip
    long = assemble(
        DOCS,
        messages=[{"role": "system", "content": system}, {"role": "user", "content": "{context}\n\n{question}"}],
        tokenizer=deepseek_v4, chat_format="deepseek-v4", question=QUESTION,
        profile=PROFILE, budget_tokens=1500,
    )  # fmt: skip
    assert long.prompt == short.prompt
    assert long.placements == short.placements


@FAST
@given(messages=conversations(), context=st.text(max_size=20), question=st.text(max_size=10))
def test_message_spans_hold_each_message(deepseek_v4, messages, context, question):
    from phaseaware.chat import get_chat_format, parse_messages
    from phaseaware.chat.spans import render_with_spans

    filled = fill(messages, context, question)
    for chat_format in FORMATS:
        rendered = render_with_spans(
            parse_messages(filled), get_chat_format(chat_format, deepseek_v4)
        )
        assert rendered.text == reference_render(chat_format, filled, deepseek_v4.bos_text, False)
        for i, (start, end) in enumerate(rendered.spans):
            assert rendered.text[start:end] == filled[i]["content"]
            if end > start:
                assert rendered.message_at(start) == i
