"""The agent middleware places a tool result exactly as ``phaseaware.assemble_append`` does.

Property test: random documents (scores present or missing, duplicate ids: copies of
one document, evidence or none), both tool roles and message templates; the oracle is
``assemble_append`` called with hand-built OpenAI-style messages and hand-built chunks
(the kit's documented missing-score and duplicate rules written out), so the
middleware's conversion and the kit are checked against the core entry point, not
against themselves.
"""

from __future__ import annotations

from dataclasses import replace
from typing import Any

import pytest

pytest.importorskip("langchain.agents")

from hypothesis import HealthCheck, given, settings  # noqa: E402
from hypothesis import strategies as st  # noqa: E402
from langchain.agents.middleware import ModelRequest  # noqa: E402
from langchain_core.documents import Document  # noqa: E402
from langchain_core.messages import AIMessage, HumanMessage, SystemMessage, ToolMessage  # noqa: E402
from langchain_openai import ChatOpenAI  # noqa: E402
from langchain_phaseaware import PhaseAwareMiddleware  # noqa: E402
from langchain_phaseaware.middleware import REPORT_KEY  # noqa: E402

import phaseaware  # noqa: E402
from phaseaware import AssemblyOptions, Chunk  # noqa: E402

QUESTION = "Below which voltage is a Helios-3 module disabled?"
CALL = {"name": "search", "args": {"query": "helios"}, "id": "call-1"}
WORDS = ["Helios", "module", "volts", "disabled", "below", "the", "3.32", "note", "{x}", "é"]


def _merged(docs: list[Any]) -> tuple[list[int], list[tuple[int, list[int]]]]:
    """The duplicate rule, written out: per id, the best score kept (missing lowest, the
    first of equal ones), at the first copy's place; no id: never merged."""
    groups: dict[Any, list[int]] = {}
    order: list[list[int]] = []
    for i, (_, _, doc_id, _) in enumerate(docs):
        if doc_id is None or doc_id not in groups:
            order.append([i])
            if doc_id is not None:
                groups[doc_id] = order[-1]
        else:
            groups[doc_id].append(i)
    kept, merged = [], []
    for group in order:
        scores = [docs[i][1] if docs[i][1] is not None else float("-inf") for i in group]
        best = group[scores.index(max(scores))]
        kept.append(best)
        if len(group) > 1:
            merged.append((best, [i for i in group if i != best]))
    return kept, merged


def _expected_scores(scores: list[float | None]) -> list[float]:
    """The kit's rule, written out: all missing -> n..1; else missing after the lowest."""
    real = [s for s in scores if s is not None]
    n = len(scores)
    if not real:
        return [float(n - i) for i in range(n)]
    return [s if s is not None else min(real) - 1.0 - i / n for i, s in enumerate(scores)]


documents_st = st.lists(
    st.tuples(
        st.lists(st.sampled_from(WORDS), min_size=1, max_size=12).map(" ".join),
        st.one_of(st.none(), st.floats(min_value=-2, max_value=2, allow_nan=False)),
        st.sampled_from(["kb-1", "kb-2", None]),  # duplicate and missing ids
        st.booleans(),  # evidence: the first word, or none
    ),
    min_size=1,
    max_size=5,
)


@settings(
    max_examples=25, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(
    docs=documents_st,
    tool_role=st.sampled_from(["tool", "user"]),
    template=st.sampled_from(["{context}", "Results:\n{context}\n\n{question}"]),
    options=st.sampled_from([None, AssemblyOptions(allow_tokenizer_mismatch=True)]),
)
def test_middleware_equals_assemble_append(o200k, profile_name, docs, tool_role, template, options):
    first_text: dict[str, str] = {}  # copies under one id hold one text (else: refused)
    docs = [(first_text.setdefault(i, t) if i else t, s, i, e) for t, s, i, e in docs]
    documents = [
        Document(
            page_content=text,
            metadata={
                **({"score": score} if score is not None else {}),
                **({"evidence": text.split()[0]} if evidence else {}),
            },
            id=doc_id,
        )
        for text, score, doc_id, evidence in docs
    ]
    profile = phaseaware.get_profile(profile_name)
    profile_arg = profile if options is not None else None  # the mismatch needs the opt-in
    middleware = PhaseAwareMiddleware(
        tokenizer=o200k, chat_format="chatml", profile=profile_arg, budget_tokens=4000,
        options=options, tool_role=tool_role, message_template=template,
    )  # fmt: skip
    tool = ToolMessage(content="x", artifact=documents, tool_call_id="call-1", name="search")
    history = [HumanMessage(QUESTION), AIMessage("", tool_calls=[CALL]), tool]
    model = ChatOpenAI(base_url="http://127.0.0.1:9/v1", api_key="unused", model="m")
    request = ModelRequest(model=model, messages=history, system_message=SystemMessage("Brief."))
    _, aligned, result = middleware.align(request)
    assert aligned is not None and result is not None

    call: dict[str, Any] = {
        "id": "call-1", "type": "function",
        "function": {"name": "search", "arguments": '{"query": "helios"}'},
    }  # fmt: skip
    sent = [
        {"role": "system", "content": "Brief."},
        {"role": "user", "content": QUESTION},
        {"role": "assistant", "content": "", "tool_calls": [call]}
        if tool_role == "tool"
        else {"role": "assistant", "content": ""},
    ]
    new = (
        {"role": "tool", "content": template, "tool_call_id": "call-1"}
        if tool_role == "tool"
        else {"role": "user", "content": template}
    )
    kept, merged = _merged(docs)
    scores = _expected_scores([docs[i][1] for i in kept])
    chunks = [
        Chunk(text=docs[i][0], score=s, id=f"doc-{i}",
              evidence=(docs[i][0].split()[0],) if docs[i][3] else ())
        for i, s in zip(kept, scores, strict=True)
    ]  # fmt: skip
    expected = phaseaware.assemble_append(
        sent=sent, new=new, chunks=chunks, tokenizer=o200k, chat_format="chatml",
        question=QUESTION, profile=profile_arg, budget_tokens=4000, options=options,
    )  # fmt: skip
    assert [(m.kept, list(m.merged)) for m in result.merged_duplicates] == merged
    assert replace(result, merged_duplicates=()) == expected
    assert aligned.content == expected.messages[-1]["content"]
    report = aligned.response_metadata[REPORT_KEY]
    plain = expected.to_dict()
    plain.pop("prompt")  # the report leaves out the conversation: the state holds it
    plain.pop("messages")
    for placement in plain["placements"]:
        index = int(placement["chunk_id"].removeprefix("doc-"))
        placement["document_index"] = index
        placement["document_id"] = docs[index][2]
    plain["merged_duplicates"] = [
        {"chunk_id": f"doc-{k}", "kept": k, "merged": m, "document_id": docs[k][2]}
        for k, m in merged
    ]
    assert report == plain
