"""phaseaware.integrate checks an adapter delegates: argument checks, per-run usage plans,
raw-response usage, a template's inputs, the plan records carry, the keyword family."""

from __future__ import annotations

import warnings
from typing import Any

import pytest

from phaseaware.chat import MissingSlotError
from phaseaware.errors import InputError, PhaseawareWarning, PromptTokenDriftError
from phaseaware.integrate import (
    CHUNK_SEPARATOR,
    PlanSent,
    SourceRecord,
    UsagePlans,
    assemble_records,
    carried_plan,
    check_context_variable,
    check_fixed_prompt,
    check_raw_usage,
    check_tool_schemas,
    conversation,
    placement_report,
    rendered_tokens,
    replan_warning,
    require_chat,
    target_of,
    template_inputs,
)

QUESTION = "Below which voltage is a Helios-3 module disabled?"
MESSAGES = [{"role": "system", "content": "Be brief."}, {"role": "user", "content": QUESTION}]


def _target(o200k: Any, **kwargs: Any) -> Any:
    args = {"tokenizer": o200k, "chat_format": "chatml", "profile": None, "budget_tokens": 500}
    return target_of({**args, **kwargs})


def test_target_of_splits_the_request_from_the_endpoint_and_state(o200k):
    target = _target(o200k, position_offset=2, state_settings=False)
    assert target.usage_offsets == (2, None) and target.budget_tokens == 500
    with pytest.raises(TypeError):
        _target(o200k, budget=3)  # an unknown keyword is an error, never dropped


def test_argument_checks_are_typed_errors(o200k):
    assert check_tool_schemas("not_rendered") == "not_rendered"
    with pytest.raises(InputError, match="tool_schemas"):
        check_tool_schemas("all")
    with pytest.raises(InputError, match="sends messages"):
        require_chat(_target(o200k, chat_format="none"))
    require_chat(_target(o200k))
    sep = CHUNK_SEPARATOR
    check_fixed_prompt(prefix="a", prefix_tokens=None, separator=sep, chunk_separator=sep)
    with pytest.raises(InputError, match="exactly one of prefix"):
        check_fixed_prompt(prefix="a", prefix_tokens=2, separator=sep, chunk_separator=sep)
    with pytest.raises(InputError, match="document_separator"):
        check_fixed_prompt(prefix=None, prefix_tokens=2, separator="--", chunk_separator=sep)


def test_usage_plans_check_at_the_end_and_forget(o200k):
    seen: list[Any] = []
    plans = UsagePlans(_target(o200k), on_mismatch="raise", on_check=seen.append)
    planned = rendered_tokens(plans.target, MESSAGES)
    plans.start("a", MESSAGES)
    assert len(plans) == 1
    assert plans.end("a", reported_tokens=planned).ok and seen[-1].planned_tokens == planned
    assert len(plans) == 0 and plans.end("a", reported_tokens=planned) is None  # forgotten
    plans.start("b", MESSAGES)
    with pytest.raises(PromptTokenDriftError, match="drift \\+2"):
        plans.end("b", reported_tokens=planned + 2)
    plans.start("c", MESSAGES)
    plans.drop("c")
    assert len(plans) == 0
    plans.start("d", MESSAGES)
    assert plans.end("d", reported_tokens=None) is None  # no usage: not checked
    with pytest.raises(InputError, match="on_mismatch"):
        UsagePlans(plans.target, on_mismatch="loud")


def test_usage_plans_render_bound_tools_or_not(o200k):
    tool = {"type": "function", "function": {"name": "search", "parameters": {}}}
    refusing = UsagePlans(_target(o200k), fix="; the adapter's fix")
    with pytest.raises(Exception, match="the adapter's fix"):  # chatml renders no tools
        refusing.start("a", MESSAGES, [tool])
    trusting = UsagePlans(_target(o200k), tool_schemas="not_rendered")
    trusting.start("a", MESSAGES, [tool])
    planned = rendered_tokens(trusting.target, MESSAGES)
    assert trusting.end("a", reported_tokens=planned).ok


def test_raw_usage_reads_the_response_then_the_fallback(o200k):
    target = _target(o200k)
    raw = {"usage": {"prompt_tokens": 12}, "model": "m"}
    assert check_raw_usage(target, planned_tokens=12, raw=raw, on_mismatch="raise").ok
    check = check_raw_usage(
        target, planned_tokens=12, raw=None, on_mismatch="warn", reported_tokens=12
    )
    assert check is not None and check.ok
    assert check_raw_usage(target, planned_tokens=12, raw={}, on_mismatch="raise") is None
    with pytest.warns(PhaseawareWarning, match="drift"):
        check_raw_usage(target, planned_tokens=10, raw=raw, on_mismatch="warn")


def test_template_inputs_name_what_is_missing_or_misplaced():
    variables = ["context", "persona"]
    keys = {"question_key": "question", "documents_key": "documents", "who": "Step"}
    good = {"question": QUESTION, "documents": [], "persona": "p", "extra": 1}
    assert template_inputs(good, variables=variables, **keys) == {"persona": "p"}
    for lacking in ("persona", "question", "documents"):
        with pytest.raises(InputError, match=lacking):
            template_inputs(
                {k: v for k, v in good.items() if k != lacking}, variables=variables, **keys
            )
    with pytest.raises(InputError, match="Step writes the context itself"):
        template_inputs({**good, "context": "x"}, variables=variables, **keys)
    with pytest.raises(InputError, match="takes a dict"):
        template_inputs("text", variables=variables, **keys)
    check_context_variable(variables)
    with pytest.raises(MissingSlotError, match="persona"):
        check_context_variable(["persona"])


def test_carried_plan_is_reused_only_while_intact(o200k):
    target = _target(o200k)
    messages = [{"role": "user", "content": "{context}\n\n{question}"}]
    records = [SourceRecord(f"Fact {i}: the answer is {i}.", None, f"n{i}") for i in range(3)]
    layout = conversation(target, messages, question=QUESTION)
    result = assemble_records(records, target=target, layout=layout, question=QUESTION)
    key = target.plan_key(messages, QUESTION)
    report = {**placement_report(result, [r.id for r in records]), "conversation_key": key}
    placed = report["placements"]
    ids = [p["document_id"] for p in placed]
    texts = [result.prompt[p["segment_char_start"] : p["char_end"]] for p in placed]
    same = {"key": key, "ids": ids, "texts": texts}
    assert carried_plan([report] * 3, placed, **same) == (report, None)
    assert carried_plan([None], placed, **same)[1] == "the records carry no phaseaware plan"
    assert "the nodes carry" in str(carried_plan([None], placed, **same, what="nodes")[1])
    assert "another conversation" in str(carried_plan([report], placed, **{**same, "key": "k"})[1])
    assert "placement" in str(carried_plan([report], [None, *placed[1:]], **same)[1])
    assert "reordered" in str(carried_plan([report], placed, **{**same, "ids": ids[::-1]})[1])
    sent = PlanSent.of(report, replanned=False)
    assert sent == PlanSent.of(result, replanned=False) and sent.token_count == result.token_count
    with pytest.warns(PhaseawareWarning, match="Synth planned the records again: why; fix it"):
        replan_warning("Synth", "why", fix="fix it")
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        assert carried_plan([report], placed, **same)[1] is None


def test_then_last_runs_after_the_last_item_only():
    import asyncio

    from phaseaware.integrate import then_last, then_last_async

    seen: list[int] = []
    assert list(then_last(iter([1, 2, 3]), seen.append)) == [1, 2, 3] and seen == [3]
    assert list(then_last(iter([]), seen.append)) == [] and seen == [3]

    async def items() -> Any:
        for i in (4, 5):
            yield i

    async def collect() -> list[int]:
        return [i async for i in then_last_async(items(), seen.append)]

    assert asyncio.run(collect()) == [4, 5] and seen == [3, 5]
