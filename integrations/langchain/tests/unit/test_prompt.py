"""PhaseAwarePrompt: exact messages, the report, errors, no mutation; sync and async."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest
from langchain_core.documents import Document
from langchain_core.messages import AIMessage, HumanMessage
from langchain_core.prompt_values import ChatPromptValue
from langchain_core.prompts import ChatPromptTemplate, MessagesPlaceholder
from langchain_phaseaware import PhaseAwarePrompt
from langchain_phaseaware.convert import message_dicts

from phaseaware.assembly.inputs.options import AssemblyOptions
from phaseaware.chat.errors import DuplicateSlotError, MissingSlotError
from phaseaware.chat.formats import get_chat_format
from phaseaware.chat.messages import parse_messages
from phaseaware.errors import InputError, PhaseawareError

OPTIONS = AssemblyOptions(allow_tokenizer_mismatch=True)  # the profile as a plain input
PROFILE = "deepseek-v4-flash-base"
QUESTION = "Below which voltage is a Helios-3 module disabled?"
SYSTEM_SLOT = ChatPromptTemplate.from_messages(
    [("system", "You are {persona}. Answer from the notes.\n{context}"), ("human", "{question}")]
)


def _prompt(o200k: Any, template: ChatPromptTemplate = SYSTEM_SLOT, **kw: Any) -> PhaseAwarePrompt:
    kw.setdefault("profile", PROFILE)
    kw.setdefault("options", OPTIONS)
    return PhaseAwarePrompt(
        template, tokenizer=o200k, chat_format="chatml", budget_tokens=2000, **kw
    )


def _render(o200k: Any, value: ChatPromptValue) -> str:
    fmt = get_chat_format("chatml", o200k)
    return fmt.render(parse_messages(message_dicts(value.messages)), add_generation_prompt=True)


def _check_exact(o200k: Any, value: ChatPromptValue, report: dict[str, Any]) -> None:
    text = _render(o200k, value)
    assert text == report["prompt"]
    measured = o200k.tokenize(text)
    assert len(measured) == report["token_count"]
    for placement in report["placements"]:
        for pos, char in zip(
            placement["key_token_positions"], placement["key_char_offsets"], strict=True
        ):
            assert measured.token_at_char(char) == pos
        assert text[placement["char_start"] : placement["char_end"]] in text


def test_messages_render_to_the_verified_prompt(o200k, make_documents):
    docs = make_documents()
    out = (
        _prompt(o200k)
        .with_report()
        .invoke({"question": QUESTION, "documents": docs, "persona": "a support agent"})
    )
    value, report = out["prompt"], out["report"]
    assert isinstance(value, ChatPromptValue)
    assert value.messages[0].content.startswith("You are a support agent. Answer from the notes.\n")
    assert value.messages[1].content == QUESTION
    _check_exact(o200k, value, report)
    assert sorted(p["document_index"] for p in report["placements"]) == list(range(5))
    assert {p["document_id"] for p in report["placements"]} == {d.id for d in docs}
    for p in report["placements"]:  # the evidence string is where its key token is
        doc = docs[p["document_index"]]
        assert report["prompt"][p["key_char_offsets"][0] :].startswith(doc.metadata["evidence"])
    assert report["period"] == 8 and all(p["residues"] for p in report["placements"])


def test_invoke_equals_with_report_prompt_and_is_deterministic(o200k, make_documents):
    prompt = _prompt(o200k)
    inputs = {"question": QUESTION, "documents": make_documents(), "persona": "x"}
    assert prompt.invoke(inputs) == prompt.with_report().invoke(inputs)["prompt"]
    assert prompt.invoke(inputs) == prompt.invoke(inputs)


def test_context_in_a_human_message_with_history_and_braces_in_variables(o200k, make_documents):
    template = ChatPromptTemplate.from_messages(
        [
            ("system", "Be brief."),
            MessagesPlaceholder("history"),
            ("human", "Notes:\n{context}\n\nQuestion: {question}"),
        ]
    )
    tricky = "What does {context} mean, and {question}? {x}"
    history = [HumanMessage("hi {context}"), AIMessage("hello")]
    out = (
        _prompt(o200k, template)
        .with_report()
        .invoke({"question": tricky, "documents": make_documents(3), "history": history})
    )
    messages = out["prompt"].messages
    assert [m.type for m in messages] == ["system", "human", "ai", "human"]
    assert messages[1].content == "hi {context}"  # never read as a slot
    assert messages[3].content.endswith("\n\nQuestion: " + tricky)
    _check_exact(o200k, out["prompt"], out["report"])


def test_empty_documents_give_the_template_with_an_empty_context(o200k):
    out = (
        _prompt(o200k).with_report().invoke({"question": QUESTION, "documents": [], "persona": "p"})
    )
    assert out["report"]["placements"] == [] and out["report"]["dropped"] == []
    assert out["prompt"].messages[0].content == "You are p. Answer from the notes.\n"
    _check_exact(o200k, out["prompt"], out["report"])


def test_async_paths(o200k, make_documents):
    prompt = _prompt(o200k)
    inputs = [
        {"question": QUESTION, "documents": make_documents(n), "persona": "p"} for n in (0, 2, 5)
    ]

    async def run() -> tuple[Any, Any, Any]:
        one = await prompt.ainvoke(inputs[2])
        many = await prompt.abatch(inputs)
        reports = await prompt.with_report().abatch(inputs)
        return one, many, reports

    one, many, reports = asyncio.run(run())
    assert one == prompt.invoke(inputs[2])
    assert many == [prompt.invoke(i) for i in inputs]
    for out, n in zip(reports, (0, 2, 5), strict=True):  # each report belongs to its own call
        assert len(out["report"]["placements"]) == n
        _check_exact(o200k, out["prompt"], out["report"])


def test_async_errors_are_the_same_typed_errors(o200k):
    with pytest.raises(InputError, match="persona"):
        asyncio.run(_prompt(o200k).ainvoke({"question": QUESTION, "documents": []}))


def test_documents_without_scores_rank_by_retrieval_order(o200k, make_documents):
    docs = [Document(page_content=d.page_content) for d in make_documents(4)]
    report = (
        _prompt(o200k)
        .with_report()
        .invoke({"question": QUESTION, "documents": docs, "persona": "p"})["report"]
    )
    ranks = {p["document_index"]: p["rank"] for p in report["placements"]}
    assert ranks == {0: 0, 1: 1, 2: 2, 3: 3}


def test_scores_from_metadata_and_configurable_keys(o200k, make_documents):
    docs = make_documents(3)
    scored = [
        Document(page_content=d.page_content, metadata={"relevance_score": s})
        for d, s in zip(docs, (0.1, 0.9, 0.5), strict=True)
    ]
    report = (
        _prompt(o200k)
        .with_report()
        .invoke({"question": QUESTION, "documents": scored, "persona": "p"})["report"]
    )
    assert {p["document_index"]: p["rank"] for p in report["placements"]} == {1: 0, 2: 1, 0: 2}
    custom = [
        Document(page_content=d.page_content, metadata={"sim": s, "facts": ["Helios"]})
        for d, s in zip(docs, (0.9, 0.1, 0.5), strict=True)
    ]
    prompt = _prompt(o200k, score_keys=("sim",), evidence_key="facts")
    report = prompt.with_report().invoke(
        {"question": QUESTION, "documents": custom, "persona": "p"}
    )["report"]
    assert {p["document_index"]: p["rank"] for p in report["placements"]} == {0: 0, 2: 1, 1: 2}
    for p in report["placements"]:
        assert report["prompt"][p["key_char_offsets"][0] :].startswith("Helios")


def test_metadata_preserved_and_documents_never_mutated(o200k, make_documents):
    docs = make_documents(4, nested={"a": [1, 2]})
    before = [d.model_copy(deep=True) for d in docs]
    ids = [id(d) for d in docs]
    _prompt(o200k).with_report().invoke({"question": QUESTION, "documents": docs, "persona": "p"})
    assert docs == before and [id(d) for d in docs] == ids
    assert all("phaseaware" not in d.metadata for d in docs)


def test_template_without_context_is_a_typed_error(o200k):
    template = ChatPromptTemplate.from_messages([("human", "{question}")])
    with pytest.raises(MissingSlotError, match=r"\{context\}") as info:
        _prompt(o200k, template)
    assert isinstance(info.value, PhaseawareError)


def test_template_with_two_contexts_is_a_typed_error(o200k):
    template = ChatPromptTemplate.from_messages([("system", "{context}"), ("human", "{context}")])
    with pytest.raises(DuplicateSlotError):
        _prompt(o200k, template).invoke({"question": QUESTION, "documents": []})


@pytest.mark.parametrize(
    ("inputs", "missing"),
    [
        ({"question": QUESTION, "documents": []}, "persona"),
        ({"documents": [], "persona": "p"}, "question"),
        ({"question": QUESTION, "persona": "p"}, "documents"),
    ],
)
def test_missing_variables_are_named(o200k, inputs, missing):
    with pytest.raises(InputError, match=missing):
        _prompt(o200k).invoke(inputs)


def test_bad_inputs_are_typed_errors(o200k):
    prompt = _prompt(o200k)
    base = {"question": QUESTION, "persona": "p"}
    with pytest.raises(InputError, match="writes the context itself"):
        prompt.invoke({**base, "documents": [], "context": "x"})
    with pytest.raises(InputError, match="Document"):
        prompt.invoke({**base, "documents": ["plain text"]})
    with pytest.raises(InputError, match="score"):
        prompt.invoke({**base, "documents": [Document(page_content="a", metadata={"score": "hi"})]})
    with pytest.raises(InputError, match="ChatPromptTemplate"):
        PhaseAwarePrompt(
            "{context}", tokenizer=o200k, chat_format="chatml", profile=None, budget_tokens=9
        )  # type: ignore[arg-type]
    with pytest.raises(InputError, match="unknown options"):
        _prompt(o200k, options={"nope": 1})


def test_position_offset_shifts_residues(o200k, make_documents):
    inputs = {"question": QUESTION, "documents": make_documents(3), "persona": "p"}
    plain = _prompt(o200k, options=OPTIONS).with_report().invoke(inputs)["report"]
    shifted = _prompt(o200k, position_offset=1).with_report().invoke(inputs)["report"]
    assert shifted["position_offset"] == 1 and plain["position_offset"] == 0
    for p in shifted["placements"]:
        assert p["residues"] == [(t + 1) % 8 for t in p["key_token_positions"]]


def test_none_chat_format_and_profile_free_planning(o200k, make_documents):
    template = ChatPromptTemplate.from_messages([("human", "{context}\n\n{question}")])
    prompt = PhaseAwarePrompt(
        template, tokenizer=o200k, chat_format="none", profile=None, budget_tokens=500
    )
    out = prompt.with_report().invoke({"question": QUESTION, "documents": make_documents(3)})
    fmt = get_chat_format("none", o200k)
    text = fmt.render(parse_messages(message_dicts(out["prompt"].messages)))
    assert text == out["report"]["prompt"] and out["report"]["period"] is None


@pytest.mark.parametrize(
    ("documents", "match"),
    [
        (None, "documents must be a list"),
        ([Document(page_content="a"), None], r"documents\[1\] is a NoneType"),
        ([Document(page_content="a", metadata={"score": True})], r"documents\[0\] has score"),
        ([Document(page_content="a", metadata={"evidence": 3})], r"documents\[0\] has evidence"),
    ],
)
def test_none_and_ill_typed_documents_are_input_errors(o200k, documents, match):
    with pytest.raises(InputError, match=match):
        _prompt(o200k).invoke({"question": QUESTION, "documents": documents, "persona": "p"})


def test_unscored_documents_rank_after_scored_ones(o200k, make_documents):
    docs = [
        Document(page_content=d.page_content, metadata={"score": s} if s is not None else {})
        for d, s in zip(make_documents(4), (None, 0.2, None, 0.1), strict=True)
    ]
    report = (
        _prompt(o200k)
        .with_report()
        .invoke({"question": QUESTION, "documents": docs, "persona": "p"})["report"]
    )
    ranks = {p["document_index"]: p["rank"] for p in report["placements"]}
    assert ranks == {1: 0, 3: 1, 0: 2, 2: 3}
