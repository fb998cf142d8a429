"""phaseaware.integrate.synthesis without a framework: a template's tagged conversation, the
plan records carry in their metadata, the send-or-replan decision and a reply's count."""

from __future__ import annotations

import warnings
from typing import Any

import pytest

from phaseaware.errors import InputError, PhaseawareWarning
from phaseaware.integrate import (
    ASSEMBLY_KEY,
    CARRIED_KEYS,
    PLACEMENT_KEY,
    SourceRecord,
    assemble_carried,
    carried_metadata,
    carried_text,
    plan_to_send,
    reply_prompt_tokens,
    tagged_conversation,
    target_of,
)

QUESTION = "Below which voltage is a Helios-3 module disabled?"
MESSAGES = [{"role": "user", "content": "{context}\n\n{question}"}]


def _target(o200k: Any) -> Any:
    args = {"tokenizer": o200k, "chat_format": "chatml", "profile": None, "budget_tokens": 500}
    return target_of(args)


def test_tagged_conversation_writes_the_placeholders_and_refuses_literal_ones():
    def render(own: str) -> Any:
        return lambda context, question: [
            {"role": "system", "content": own},
            {"role": "user", "content": f"Context: {context}\nQ: {question}"},
        ]

    assert tagged_conversation(render("Be brief.")) == [
        {"role": "system", "content": "Be brief."},
        {"role": "user", "content": "Context: {context}\nQ: {question}"},
    ]
    with pytest.raises(InputError, match=r"the text QA template's own text contains \{question\}"):
        tagged_conversation(render("Answer {question} well."))
    with pytest.raises(InputError, match=r"my prompt must use \{ctx\} exactly once"):
        tagged_conversation(
            lambda context, question: [{"role": "user", "content": f"{context} {context}"}],
            template="my prompt",
            context_variable="{ctx}",
        )


def test_carried_metadata_copies_and_carried_text_strips_the_pad():
    own = {"source": {"page": 1}, PLACEMENT_KEY: "stale", ASSEMBLY_KEY: "stale"}
    placement = {"char_start": 3, "segment_char_start": 0}
    report: dict[str, Any] = {"placements": []}
    out = carried_metadata(own, placement=placement, report=report)
    assert out == {"source": {"page": 1}, PLACEMENT_KEY: placement, ASSEMBLY_KEY: report}
    assert out["source"] is not own["source"] and out[PLACEMENT_KEY] is not placement
    assert out[ASSEMBLY_KEY] is report and set(CARRIED_KEYS) == {PLACEMENT_KEY, ASSEMBLY_KEY}
    assert own[PLACEMENT_KEY] == "stale"  # the caller's metadata untouched
    assert carried_text("   text", out) == "text"
    assert carried_text("text", {"source": 1}) is None


def test_plan_to_send_reuses_an_intact_plan_and_warns_when_one_is_lost(o200k):
    target = _target(o200k)
    records = [SourceRecord(f"Fact {i}: the answer is {i}.", None, f"n{i}") for i in range(3)]
    plan = assemble_carried(records, target=target, messages=MESSAGES, question=QUESTION)
    assert plan.key == target.plan_key(MESSAGES, QUESTION)
    assert plan.report["conversation_key"] == plan.key
    metadata = [
        carried_metadata({}, placement=p.placement, report=plan.report) for p in plan.placed
    ]
    texts = [p.segment.text for p in plan.placed]
    ids = [p.placement["document_id"] for p in plan.placed]
    calls: list[int] = []

    def replan() -> tuple[Any, str]:
        calls.append(1)
        return plan.result, "new"

    args: dict[str, Any] = {
        "target": target, "messages": MESSAGES, "question": QUESTION, "ids": ids,
        "replan": replan, "kept": "kept", "who": "Synth", "planner": "Post", "fix": "fix it",
    }  # fmt: skip
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        sent, kept = plan_to_send(metadata, texts=texts, **args)
        assert (kept, sent.replanned, calls) == ("kept", False, [])
        assert sent.token_count == plan.result.token_count
        sent, out = plan_to_send([{}] * 3, texts=texts, **args)  # no plan: no warning
        assert (out, sent.replanned, calls) == ("new", True, [1])
    changed = [*texts[:-1], texts[-1] + "!"]
    with pytest.warns(PhaseawareWarning, match=r"Synth planned the records again: .*\(by Post\)"):
        sent, out = plan_to_send(metadata, texts=changed, **args)
    assert out == "new" and sent.replanned


def test_reply_prompt_tokens_reads_usage_then_the_fallback_then_before():
    assert reply_prompt_tokens({"usage": {"prompt_tokens": 7}}, 9, 3) == 7
    assert reply_prompt_tokens(None, 9, 3) == 9
    assert reply_prompt_tokens(None, True, 3) == 3  # a bool is no count
    assert reply_prompt_tokens(None, "9", None) is None
