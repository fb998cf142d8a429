"""LCEL end to end over real HTTP: PhaseAwarePrompt -> ChatOpenAI -> the reference server.

What the server received is read from its engine (messages and the token ids it fed
the model) and checked against the report: every evidence key token is where the
report says. Then the same held-out questions go through a plain ``"\\n\\n".join``
chain, and phase-aware placement must answer more of them.
"""

from __future__ import annotations

from typing import Any

import pytest
from langchain_core.documents import Document
from langchain_core.prompts import ChatPromptTemplate
from langchain_core.runnables import RunnableLambda
from langchain_phaseaware import PhaseAwarePrompt, PhaseAwareUsageCheck

from phaseaware.calibration import task
from phaseaware.demo.rag_questions import make_questions
from phaseaware.demo.run import BUDGET_TOKENS, CHUNKS_PER_QUESTION, MAX_FILLER_SENTENCES
from phaseaware.errors import PromptTokenDriftError
from phaseaware.intervals import wilson_interval
from phaseaware.tokenizers import load_tokenizer

pytestmark = pytest.mark.slow

TEMPLATE = ChatPromptTemplate.from_messages([("human", "{context}\n\n{question}")])
QUESTIONS = 48
QUESTION_SEED = 30_000  # disjoint from calibration's seeds and the demo's questions


def _documents(question: Any) -> list[Document]:
    return [
        Document(
            page_content=c.text,
            metadata={"score": c.score, "evidence": list(c.evidence), "source": c.id},
        )
        for c in question.chunks
    ]


def _questions(count: int) -> list[Any]:
    return make_questions(
        count=count,
        seed=QUESTION_SEED,
        chunks_per_question=CHUNKS_PER_QUESTION,
        max_filler_sentences=MAX_FILLER_SENTENCES,
    )


@pytest.fixture(scope="module")
def tokenizer() -> Any:
    return load_tokenizer("reference")


def _received_for(served: Any, before: int, content: str) -> Any:
    hits = [r for r in served.log[before:] if r.messages[-1]["content"] == content]
    assert len(hits) == 1, "the server should have received this prompt exactly once"
    return hits[0]


def test_every_key_token_lands_where_the_report_says(
    served, chat_model, reference_profile, tokenizer
):
    prompt = PhaseAwarePrompt(
        TEMPLATE,
        tokenizer=tokenizer,
        chat_format="hf",
        profile=reference_profile,
        budget_tokens=BUDGET_TOKENS,
    )
    checks: list[Any] = []
    usage = PhaseAwareUsageCheck(
        tokenizer=tokenizer, chat_format="hf", on_mismatch="raise", on_check=checks.append
    )
    chain = prompt.with_report() | {
        "answer": RunnableLambda(lambda x: x["prompt"]) | chat_model,
        "report": RunnableLambda(lambda x: x["report"]),
        "prompt": RunnableLambda(lambda x: x["prompt"]),
    }
    questions = _questions(6)
    before = len(served.log)
    outputs = chain.batch(
        [{"question": q.question, "documents": _documents(q)} for q in questions],
        config={"callbacks": [usage], "max_concurrency": 6},
    )
    assert len(checks) == len(questions) and all(c.ok for c in checks)
    for q, out in zip(questions, outputs, strict=True):
        report = out["report"]
        content = out["prompt"].messages[0].content
        received = _received_for(served, before, content)
        # The server's own render and tokenization of what it got is the report's prompt.
        assert served.engine.render_chat(received.messages) == report["prompt"]
        measured = tokenizer.tokenize(report["prompt"])
        assert list(received.ids) == list(measured.ids)
        assert len(received.ids) == report["token_count"]
        assert out["answer"].usage_metadata["input_tokens"] == report["token_count"]
        evidence_seen = False
        for placement in report["placements"]:
            positions = placement["key_token_positions"]
            assert positions, placement
            for pos, char in zip(positions, placement["key_char_offsets"], strict=True):
                assert measured.token_at_char(char) == pos
                residue = (pos + report["position_offset"]) % report["period"]
                assert residue in placement["residues"]
            source = q.chunks[placement["document_index"]]
            if source.evidence:
                evidence_seen = True
                # the evidence key: the token the server fed the model at that position
                key = tokenizer.decode([received.ids[positions[0]]]).strip()
                assert key == source.evidence[0].split()[0]
        assert evidence_seen


def test_usage_check_raises_when_the_server_counts_other_tokens(
    served, chat_model, reference_profile, tokenizer
):
    prompt = PhaseAwarePrompt(
        TEMPLATE, tokenizer=tokenizer, chat_format="hf", profile=reference_profile,
        budget_tokens=BUDGET_TOKENS,
    )  # fmt: skip
    q = _questions(1)[0]
    wrong = PhaseAwareUsageCheck(
        tokenizer=tokenizer, chat_format="hf", position_offset=1, on_mismatch="raise"
    )
    with pytest.raises(PromptTokenDriftError, match="drift -1"):
        (prompt | chat_model).invoke(
            {"question": q.question, "documents": _documents(q)}, config={"callbacks": [wrong]}
        )


@pytest.mark.needs_trained_reference
def test_phase_aware_beats_the_plain_join_chain(served, chat_model, reference_profile, tokenizer):
    questions = _questions(QUESTIONS)
    inputs = [{"question": q.question, "documents": _documents(q)} for q in questions]
    phase = (
        PhaseAwarePrompt(
            TEMPLATE,
            tokenizer=tokenizer,
            chat_format="hf",
            profile=reference_profile,
            budget_tokens=BUDGET_TOKENS,
        )
        | chat_model
    )
    plain = (
        RunnableLambda(
            lambda x: {
                "context": "\n\n".join(d.page_content for d in x["documents"]),
                "question": x["question"],
            }
        )
        | TEMPLATE
        | chat_model
    )
    rows = {}
    for name, chain in (("plain join", plain), ("phase-aware", phase)):
        answers = chain.batch(inputs, config={"max_concurrency": 8})
        correct = sum(
            task.extract_answer(str(a.content)) == q.answer
            for a, q in zip(answers, questions, strict=True)
        )
        low, high = wilson_interval(correct, len(questions))
        rows[name] = correct
        print(
            f"{name:12s} {correct}/{len(questions)} = {correct / len(questions):6.1%} "
            f"(95% Wilson {low:.1%}-{high:.1%})"
        )
    assert rows["phase-aware"] > rows["plain join"], rows
    assert rows["phase-aware"] >= 0.9 * len(questions), rows
