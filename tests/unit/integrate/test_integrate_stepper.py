"""phaseaware.integrate.AgentStepper without a framework: one adapter's step state over
plain dict messages (converted once, resent as sent, reports remembered, bounded)."""

from __future__ import annotations

from typing import Any

from phaseaware.integrate import AgentPolicy, AgentStepper, SourceRecord, target_of

CALL = {"id": "c1", "type": "function", "function": {"name": "search", "arguments": "{}"}}


def _stepper(o200k: Any, **kwargs: Any) -> AgentStepper[dict[str, Any]]:
    target = target_of(
        {"tokenizer": o200k, "chat_format": "chatml", "profile": None, "budget_tokens": 4000}
    )
    return AgentStepper(
        target, AgentPolicy(), convert=lambda m, _: dict(m), text=lambda m: m["content"],
        adapter="Adapter", **kwargs,
    )  # fmt: skip


def _conversation(result: str) -> list[dict[str, Any]]:
    return [
        {"role": "user", "content": "Which vault code?"},
        {"role": "assistant", "content": "", "tool_calls": [CALL]},
        {"role": "tool", "tool_call_id": "c1", "content": result},
    ]


def _call_id(message: dict[str, Any]) -> object:
    return message.get("tool_call_id") if message["role"] == "tool" else None


def _rebuild(original: dict[str, Any], step: Any) -> dict[str, Any]:
    return {**original, "content": step.content, "report": step.report}


def test_align_aligns_the_newest_result_then_resends_it(o200k):
    stepper = _stepper(o200k)
    messages = _conversation("alpha\n\nbeta")
    kwargs: dict[str, Any] = {"call_id": _call_id, "aligned": lambda m: "report" in m}
    out, step = stepper.align(messages, rebuild=_rebuild, **kwargs)
    assert step is not None and step.index == 2 and out[2]["content"] == step.content
    assert messages[2]["content"] == "alpha\n\nbeta"  # the caller's message untouched
    assert stepper.report("c1") == step.report == stepper.last_report()
    calls: list[int] = []
    again, second = stepper.align(messages, rebuild=lambda m, s: calls.append(1) or m, **kwargs)
    assert second is None and calls == [] and again[2] is out[2]  # resent as sent, no new step
    edited = _conversation("gamma")
    assert stepper.resent("c1", edited[2]) is edited[2]  # its text changed: not the sent one
    stepper.reset()
    assert stepper.report("c1") is None and stepper.last_report() is None


def test_step_takes_the_adapters_records_and_checks_only_aligned_replies(o200k):
    stepper = _stepper(o200k, max_sent=1)
    records = [SourceRecord("alpha", 0.9, "a"), SourceRecord("beta", 0.1, "b")]
    step = stepper.step(
        _conversation("ignored"), aligned=lambda i: False, records=lambda m: records
    )
    assert step is not None
    assert {p["document_id"] for p in step.report["placements"]} == {"a", "b"}
    assert stepper.check(None, {"usage": {"prompt_tokens": 1}}, on_mismatch="raise") is None
    raw = {"usage": {"prompt_tokens": step.result.token_count}}
    check = stepper.check(step.result, raw, on_mismatch="raise")
    assert check is not None and check.ok
    stepper.remember("c1", {"content": "x"}, {"content": "y"}, {"n": 1})
    stepper.remember("c2", {"content": "x"}, {"content": "z"}, {"n": 2})
    assert len(stepper.sent) == 1 and stepper.report("c1") is None  # bounded


def test_a_result_without_a_call_id_is_aligned_but_not_remembered(o200k):
    stepper = _stepper(o200k)
    messages = _conversation("alpha\n\nbeta")
    del messages[2]["tool_call_id"]  # nothing to resend it under later
    out, step = stepper.align(
        messages, rebuild=_rebuild, call_id=_call_id, aligned=lambda m: "report" in m
    )
    assert step is not None and out[2]["content"] == step.content
    assert len(stepper.sent) == 0 and stepper.last_report() is None


def test_ids_are_asked_for_where_the_server_returns_them_and_checked_id_for_id(o200k):
    import dataclasses

    import pytest

    from phaseaware.endpoints import EndpointRecord
    from phaseaware.errors import PromptTokenDriftError

    record = EndpointRecord(
        base_url="http://127.0.0.1:30000/v1", model="m", offset=1, offsets=(1,), mode="count",
        stability="constant", date="2026-12-04T00:00:00+00:00", tokenizer_spec=o200k.spec,
        tokenizer_fingerprint=o200k.fingerprint(), chat_format="chatml", probes=9,
        tool_version="0", server="sglang 0.5.23",
    )  # fmt: skip
    target = target_of({"tokenizer": o200k, "chat_format": "chatml", "profile": None,
                        "budget_tokens": 4000, "endpoint": record})  # fmt: skip
    assert target.request_kwargs() == {}  # nothing asked by default (streaming: SGLang refuses)
    assert target.request_kwargs(prompt_ids=True) == {
        "extra_body": {"return_prompt_token_ids": True}}  # fmt: skip
    assert target.merged_kwargs({"extra_body": {"x": 1}}, prompt_ids=True) == {
        "extra_body": {"x": 1, "return_prompt_token_ids": True}}  # fmt: skip
    vllm = dataclasses.replace(target, endpoint=dataclasses.replace(record, server="vllm 0.32.0"))
    assert vllm.request_kwargs(prompt_ids=True) == {"extra_body": {"return_token_ids": True}}
    unknown = dataclasses.replace(target, endpoint=dataclasses.replace(record, server=None))
    assert unknown.request_kwargs(prompt_ids=True) == {}
    # a call that may stream asks vLLM (which sends the ids in the first chunk), not SGLang
    assert vllm.asks_prompt_ids(may_stream=True) and vllm.asks_prompt_ids(may_stream=False)
    assert target.asks_prompt_ids(may_stream=False)
    assert not target.asks_prompt_ids(may_stream=True)
    assert not unknown.asks_prompt_ids(may_stream=False)

    stepper = AgentStepper(target, AgentPolicy(), convert=lambda m, _: dict(m),
                           text=lambda m: m["content"], adapter="Adapter")  # fmt: skip
    _, step = stepper.align(_conversation("alpha\n\nbeta"), rebuild=_rebuild,
                            call_id=_call_id, aligned=lambda m: "report" in m)  # fmt: skip
    assert step is not None and step.result is not None
    ids = [7, *o200k.encode(step.result.prompt)]  # the server's own token, then the plan's

    def raw(server_ids: list[int]) -> dict[str, Any]:  # SGLang: the ids on the first choice
        return {"usage": {"prompt_tokens": len(server_ids)},
                "choices": [{"index": 0, "prompt_token_ids": server_ids}]}  # fmt: skip

    check = stepper.check(step.result, raw(ids), on_mismatch="raise")
    assert check is not None and check.ok and check.ids_compared
    swapped = [*ids[:6], ids[6] + 1, *ids[7:]]  # same count, one id off
    with pytest.raises(PromptTokenDriftError, match="differ from phaseaware.s at planned token 5 "):
        stepper.check(step.result, raw(swapped), on_mismatch="raise")
    counted = stepper.check(
        step.result, {"usage": {"prompt_tokens": len(ids)}}, on_mismatch="raise"
    )
    assert counted is not None and counted.ok and not counted.ids_compared  # no ids: the count
