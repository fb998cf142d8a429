"""The LangChain and LlamaIndex adapters give the same prompt and report for the same input.

Both convert their framework's objects and call :mod:`phaseaware.integrate`; fed the
same texts, scores with gaps (``None``) and duplicate ids, into the same conversation
(one user message ``{context}\\n\\n{question}``, ChatML), they must agree byte for
byte, report included (LlamaIndex's adds only its ``conversation_key``).
"""

from __future__ import annotations

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
from phaseaware.tokenizers import load_tokenizer  # noqa: E402

QUESTION = "What is the access code for Priya ?"
OPTIONS = AssemblyOptions(allow_tokenizer_mismatch=True)
PROFILE = "deepseek-v4-flash-base"
TOKENIZER = load_tokenizer("tiktoken:o200k_base")
TEXTS = [
    "river waits . The access code for Priya is 317 . A late tower rests .",
    "station fades . The access code for Hugo is 204 . One green lamp rests .",
    "kitchen turns beside that open harbor . The access code for Mira is 550 .",
    "the access code for Priya was 999 last year , before the change .",
]


def _both(items: list[tuple[str, float | None, str]]) -> tuple[dict[str, Any], dict[str, Any]]:
    common: dict[str, Any] = dict(
        tokenizer=TOKENIZER, chat_format="chatml", profile=PROFILE, budget_tokens=2000,
        options=OPTIONS,
    )  # fmt: skip
    prompt = PhaseAwarePrompt(
        ChatPromptTemplate.from_messages([("human", "{context}\n\n{question}")]), **common
    )
    documents = [
        Document(page_content=t, metadata={} if s is None else {"score": s}, id=i)
        for t, s, i in items
    ]
    lc = prompt.with_report().invoke({"question": QUESTION, "documents": documents})["report"]
    post = PhaseAwarePostprocessor(
        messages=[{"role": "user", "content": "{context}\n\n{question}"}], **common
    )
    nodes = [NodeWithScore(node=TextNode(text=t, id_=i), score=s) for t, s, i in items]
    out = post.postprocess_nodes(nodes, query_bundle=QueryBundle(QUESTION))
    li = dict(out[0].node.metadata[ASSEMBLY_KEY])
    li.pop("conversation_key")
    return lc, li


def test_scores_with_gaps_and_duplicate_ids_give_one_prompt_and_report():
    items = [
        (TEXTS[0], None, "a"),
        (TEXTS[1], 0.4, "a"),
        (TEXTS[2], None, "b"),
        (TEXTS[3], 0.9, "a"),
    ]
    lc, li = _both(items)
    assert lc == li
    ranks = {p["document_index"]: p["rank"] for p in lc["placements"]}
    assert ranks == {3: 0, 1: 1, 0: 2, 2: 3}  # scored first; unscored after, in retrieval order
    assert [p["document_id"] for p in sorted(lc["placements"], key=lambda p: p["document_index"])] == [
        "a", "a", "b", "a",
    ]  # fmt: skip


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
    lc, li = _both(items)
    assert lc == li
