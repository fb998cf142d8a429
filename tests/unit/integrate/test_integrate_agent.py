"""The kit's agent-step policy, without a framework: which message aligns, the question,
document splitting, the policy's checks, the bounded memories and the light report."""

from __future__ import annotations

import warnings

import pytest

from phaseaware import AssemblyRequest
from phaseaware.errors import InputError
from phaseaware.integrate import (
    AgentPolicy,
    MessageMemo,
    ParallelToolResultsWarning,
    SentMemory,
    SourceRecord,
    align_step,
    model_view,
    question_of,
    resolve_target,
    split_documents,
    step_index,
)


def _call(i: str, name: str = "search") -> dict:
    return {"id": i, "type": "function", "function": {"name": name, "arguments": "{}"}}


CONVERSATION = [
    {"role": "system", "content": "Be brief."},
    {"role": "user", "content": "First question?"},
    {"role": "assistant", "content": "", "tool_calls": [_call("c1")]},
    {"role": "tool", "tool_call_id": "c1", "content": "alpha\n\nbeta"},
]


def test_step_index_is_the_newest_lone_tool_result():
    policy = AgentPolicy()
    assert step_index(CONVERSATION, policy=policy, aligned=lambda i: False) == 3
    assert step_index(CONVERSATION, policy=policy, aligned=lambda i: i == 3) is None
    assert step_index(CONVERSATION[:3], policy=policy, aligned=lambda i: False) is None
    other = AgentPolicy(tool_names=["lookup"])
    assert step_index(CONVERSATION, policy=other, aligned=lambda i: False) is None
    named = AgentPolicy(tool_names=["search"])
    assert step_index(CONVERSATION, policy=named, aligned=lambda i: False) == 3


def test_parallel_results_are_left_alone_with_one_warning():
    parallel = [
        *CONVERSATION[:2],
        {"role": "assistant", "content": "", "tool_calls": [_call("c1"), _call("c2")]},
        {"role": "tool", "tool_call_id": "c1", "content": "alpha"},
        {"role": "tool", "tool_call_id": "c2", "content": "beta"},
    ]
    warned = [False]
    with pytest.warns(ParallelToolResultsWarning):
        assert (
            step_index(parallel, policy=AgentPolicy(), aligned=lambda i: False, warned=warned)
            is None
        )
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        assert (
            step_index(parallel, policy=AgentPolicy(), aligned=lambda i: False, warned=warned)
            is None
        )


def test_question_split_and_model_view():
    assert question_of(CONVERSATION) == "First question?"
    assert question_of([{"role": "assistant", "content": "x"}]) == ""
    assert split_documents("a\n\n\n\nb", "\n\n") == [SourceRecord("a"), SourceRecord("b")]
    view = model_view(CONVERSATION, "user")
    assert view[2] == {"role": "assistant", "content": ""}
    assert view[3] == {"role": "user", "content": "alpha\n\nbeta"}
    assert model_view(CONVERSATION, "tool") == CONVERSATION


@pytest.mark.parametrize(
    "kwargs, match",
    [
        ({"message_template": "no slot"}, "message_template"),
        ({"document_separator": ""}, "document_separator"),
        ({"tool_role": "bot"}, "tool_role"),
        ({"tool_schemas": "refuse"}, "tool_schemas"),
        ({"tool_names": "search"}, "tool_names"),
    ],
)
def test_policy_checks_its_fields(kwargs, match):
    with pytest.raises(InputError, match=match):
        AgentPolicy(**kwargs)


def test_memories_are_bounded_and_convert_once():
    memory: SentMemory[int] = SentMemory(max_entries=2)
    for k in range(3):
        memory.put(str(k), k)
    assert len(memory) == 2 and memory.get("0") is None and memory.newest() == 2
    calls = []
    memo = MessageMemo(lambda m, i: calls.append(i) or {"content": m["text"]}, lambda m: m["text"])
    first = {"text": "a"}
    assert memo.dicts([first]) == [{"content": "a"}]
    memo.dicts([first])
    assert calls == [0]  # the same object: converted once
    first["text"] = "b"  # edited in place: converted again
    assert memo.dicts([first]) == [{"content": "b"}] and calls == [0, 0]


def test_align_step_reports_without_the_conversation(deepseek_v4):
    target = resolve_target(
        AssemblyRequest(tokenizer=deepseek_v4, chat_format="deepseek-v4", budget_tokens=3000)
    )
    step = align_step(
        target, AgentPolicy(message_template="R:\n{context}"), messages=CONVERSATION, index=3
    )
    assert step is not None and step.content.startswith("R:\n")
    assert "prompt" not in step.report and "messages" not in step.report
    assert [p["document_id"] for p in step.report["placements"]] == [None, None]
    assert step.result.messages is not None and step.result.messages[-1]["content"] == step.content
