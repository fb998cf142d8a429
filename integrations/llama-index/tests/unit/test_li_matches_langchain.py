"""The LangChain, LlamaIndex and Haystack adapters give the same prompt and report for the
same input.

Both convert their framework's objects and call :mod:`phaseaware.integrate`; fed the
same texts, scores with gaps (``None``) and duplicate ids, into the same conversation
(one user message ``{context}\\n\\n{question}``, ChatML), they must agree byte for
byte, report included (LlamaIndex's adds only its ``conversation_key``). Haystack's
``PhaseAwareChatPromptBuilder`` (when ``phaseaware-haystack`` is installed) writes the same
slot as ChatPromptBuilder users do, a loop over ``documents``, and must agree too.
"""

from __future__ import annotations

import importlib.util
from typing import Any

import pytest

pytest.importorskip("langchain_phaseaware")

from hypothesis import given, settings  # noqa: E402
from hypothesis import strategies as st  # noqa: E402
from langchain_core.documents import Document  # noqa: E402
from langchain_core.prompts import ChatPromptTemplate  # noqa: E402
from langchain_phaseaware import PhaseAwarePrompt  # noqa: E402
from llama_index.core.schema import NodeWithScore, QueryBundle, TextNode  # noqa: E402
from llama_index.postprocessor.phaseaware import ASSEMBLY_KEY, PhaseAwarePostprocessor  # noqa: E402

from phaseaware import AssemblyOptions  # noqa: E402
from phaseaware.errors import InputError  # noqa: E402
from phaseaware.tokenizers import load_tokenizer  # noqa: E402

QUESTION = "What is the access code for Priya ?"


def _installed(name: str) -> bool:
    try:
        return importlib.util.find_spec(name) is not None
    except ModuleNotFoundError:  # a parent package is missing
        return False


HAYSTACK = _installed("haystack_integrations.components.builders.phaseaware")
OPTIONS = AssemblyOptions(allow_tokenizer_mismatch=True)
PROFILE = "deepseek-v4-flash-base"
TOKENIZER = load_tokenizer("tiktoken:o200k_base")
TEXTS = [
    "river waits . The access code for Priya is 317 . A late tower rests .",
    "station fades . The access code for Hugo is 204 . One green lamp rests .",
    "kitchen turns beside that open harbor . The access code for Mira is 550 .",
    "the access code for Priya was 999 last year , before the change .",
]


COMMON: dict[str, Any] = dict(
    tokenizer=TOKENIZER, chat_format="chatml", profile=PROFILE, budget_tokens=2000,
    options=OPTIONS,
)  # fmt: skip


def _lc_report(items: list[tuple[str, float | None, str]]) -> dict[str, Any]:
    prompt = PhaseAwarePrompt(
        ChatPromptTemplate.from_messages([("human", "{context}\n\n{question}")]), **COMMON
    )
    documents = [
        Document(page_content=t, metadata={} if s is None else {"score": s}, id=i)
        for t, s, i in items
    ]
    report: dict[str, Any] = prompt.with_report().invoke(
        {"question": QUESTION, "documents": documents}
    )["report"]
    return report


def _li_report(items: list[tuple[str, float | None, str]]) -> dict[str, Any]:
    post = PhaseAwarePostprocessor(
        messages=[{"role": "user", "content": "{context}\n\n{question}"}], **COMMON
    )
    nodes = [NodeWithScore(node=TextNode(text=t, id_=i), score=s) for t, s, i in items]
    out = post.postprocess_nodes(nodes, query_bundle=QueryBundle(QUESTION))
    li = dict(out[0].node.metadata[ASSEMBLY_KEY])
    li.pop("conversation_key")
    return li


def _hs_report(items: list[tuple[str, float | None, str]]) -> dict[str, Any] | None:
    """Haystack's builder's report, or ``None`` when phaseaware-haystack is not installed."""
    try:
        from haystack import Document as HaystackDocument
        from haystack.dataclasses import ChatMessage as HaystackMessage
        from haystack_integrations.components.builders.phaseaware import (
            PhaseAwareChatPromptBuilder,
        )
    except ImportError:
        return None
    template = [
        HaystackMessage.from_user(
            "{% for d in documents %}{{ d.content }}{% endfor %}\n\n{{ question }}"
        )
    ]
    builder = PhaseAwareChatPromptBuilder(
        template, **{**COMMON, "options": {"allow_tokenizer_mismatch": True}}
    )
    documents = [HaystackDocument(content=t, score=s, id=i) for t, s, i in items]
    out = builder.run(documents=documents, question=QUESTION)
    report: dict[str, Any] = out["report"]
    assert out["prompt"][0].text == report["messages"][0]["content"]
    return report


def _both(items: list[tuple[str, float | None, str]]) -> tuple[dict[str, Any], dict[str, Any]]:
    lc, li, hs = _lc_report(items), _li_report(items), _hs_report(items)
    assert hs is None or hs == lc
    return lc, li


def test_scores_with_gaps_and_duplicate_ids_give_one_prompt_and_report():
    items = [
        (TEXTS[0], None, "a"),
        (TEXTS[1], 0.4, "b"),
        (TEXTS[2], None, "c"),
        (TEXTS[3], 0.9, "d"),
        (TEXTS[1], 0.7, "b"),  # the hybrid retriever's second copy: the best score of "b"
        (TEXTS[0], None, "a"),  # an unscored copy: merged into the first
    ]
    lc, li = _both(items)
    assert lc == li
    ranks = {p["document_index"]: p["rank"] for p in lc["placements"]}
    assert ranks == {3: 0, 4: 1, 0: 2, 2: 3}  # scored first; unscored after, in retrieval order
    assert [p["document_id"] for p in sorted(lc["placements"], key=lambda p: p["document_index"])] == [
        "a", "c", "d", "b",
    ]  # fmt: skip
    merged = [(m["document_id"], m["kept"], m["merged"]) for m in lc["merged_duplicates"]]
    assert merged == [("a", 0, [5]), ("b", 4, [1])]


def test_different_texts_under_one_id_are_refused_by_both():
    items = [(TEXTS[0], None, "a"), (TEXTS[1], 0.4, "a")]
    with pytest.raises(InputError) as lc_error:
        _lc_report(items)
    with pytest.raises(InputError) as li_error:
        _li_report(items)
    if HAYSTACK:
        with pytest.raises(InputError) as hs_error:
            _hs_report(items)
        assert str(hs_error.value) == str(lc_error.value)
    assert str(lc_error.value) == str(li_error.value).replace("nodes[", "documents[")
    assert "documents[0] and documents[1] share the id 'a'" in str(lc_error.value)


@settings(max_examples=15, deadline=None)
@given(
    st.lists(
        st.tuples(
            st.sampled_from(TEXTS),
            st.one_of(st.none(), st.floats(min_value=-1, max_value=1, allow_nan=False)),
            st.sampled_from(["x", "y"]),
        ),
        min_size=1,
        max_size=4,
    )
)
def test_same_input_same_output(items):
    outcomes = []
    for report in (_lc_report, _li_report, *((_hs_report,) if HAYSTACK else ())):
        try:
            outcomes.append(report(items))
        except InputError as exc:  # different texts under one id: both refuse, alike
            outcomes.append(str(exc).replace("nodes[", "documents["))
    assert all(outcome == outcomes[0] for outcome in outcomes)
