"""phaseaware.integrate: the one rule for records, the target, the report, the checks."""

from __future__ import annotations

import math
import warnings
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

import phaseaware
from phaseaware import AssemblyOptions
from phaseaware.chat import UnsupportedSettingError
from phaseaware.errors import InputError, PhaseawareWarning
from phaseaware.integrate import (
    AssemblyRequest,
    SourceRecord,
    assemble_records,
    check_usage,
    conversation,
    merge_records,
    placement_report,
    record_chunks,
    record_index,
    relevance_scores,
    reorder_records,
    resolve_options,
    resolve_target,
)

QUESTION = "Below which voltage is a Helios-3 module disabled?"
scores_st = st.lists(
    st.one_of(st.none(), st.floats(min_value=-1e6, max_value=1e6, allow_nan=False)), max_size=12
)


def _resolve(**kwargs: Any) -> Any:
    """``resolve_target`` of the request these keywords state (kit keywords apart)."""
    kit = {
        k: kwargs.pop(k) for k in ("endpoint", "state_settings", "default_options") if k in kwargs
    }
    return resolve_target(AssemblyRequest(**kwargs), **kit)


@given(scores_st)
def test_missing_scores_never_outrank_real_ones_and_keep_retrieval_order(scores):
    relevance = relevance_scores(scores)
    assert len(relevance) == len(scores) and all(math.isfinite(r) for r in relevance)
    real = [i for i, s in enumerate(scores) if s is not None]
    missing = [i for i, s in enumerate(scores) if s is None]
    for i in real:
        assert relevance[i] == scores[i]  # a real score is kept as given
        assert all(relevance[i] > relevance[j] for j in missing)
    for a, b in zip(missing, missing[1:], strict=False):
        assert relevance[a] > relevance[b]  # retrieval order among the unscored


def test_all_missing_is_retrieval_order():
    assert relevance_scores([None, None, None]) == [3.0, 2.0, 1.0]


def test_record_chunks_ids_are_positional():
    chunks = record_chunks(
        [SourceRecord("a", 0.5, "x"), SourceRecord("b", None, None), SourceRecord("c", 1, None)]
    )
    assert [c.id for c in chunks] == ["doc-0", "doc-1", "doc-2"]
    assert [record_index(c.id) for c in chunks] == [0, 1, 2]
    assert chunks[1].score < 0.5 and chunks[2].score == 1.0
    assert record_chunks([SourceRecord("a", evidence="a")])[0].evidence == ("a",)


def test_copies_under_one_id_merge_into_the_best_scored_one_at_the_first_place():
    records = [
        SourceRecord("a", 0.2, "x"),  # BM25's copy
        SourceRecord("b", None, None),
        SourceRecord("a", 0.9, "x"),  # the vector retriever's copy: the best score
        SourceRecord("c", None, "y"),
        SourceRecord("c", None, "y"),  # unscored copies: the first kept
        SourceRecord("d", 0.9, 7),
        SourceRecord("d", 0.9, 7),  # equal scores: the first kept
    ]
    merged = merge_records(records)
    assert [c.id for c in merged.chunks] == ["doc-2", "doc-1", "doc-3", "doc-5"]
    assert [c.text for c in merged.chunks] == ["a", "b", "c", "d"]
    assert merged.chunks[0].score == 0.9
    assert [(m.chunk_id, m.kept, m.merged) for m in merged.merged] == [
        ("doc-2", 2, (0,)), ("doc-3", 3, (4,)), ("doc-5", 5, (6,)),
    ]  # fmt: skip
    assert record_chunks(records) == merged.chunks
    with pytest.raises(InputError, match=r"nodes\[0\] and nodes\[1\] share the id 'x' but"):
        merge_records([SourceRecord("a", id="x"), SourceRecord("A", id="x")], what="nodes")
    with pytest.raises(InputError, match=r"duplicate id 'x' \(documents\[0\] and documents\[2\]"):
        merge_records(records, duplicate_ids="error")
    assert len(merge_records([SourceRecord("a"), SourceRecord("a")]).chunks) == 2  # no id
    assert (
        len(merge_records([SourceRecord("a", id=["x"]), SourceRecord("a", id=["x"])]).chunks) == 2
    )


def test_assembly_reports_the_merge_with_the_framework_ids(o200k):
    target = _resolve(tokenizer=o200k, chat_format="chatml", budget_tokens=400)
    records = [
        SourceRecord("The code of vault A is 17.", 0.2, "kb-a"),
        SourceRecord("The code of vault B is 23.", 0.5, "kb-b"),
        SourceRecord("The code of vault A is 17.", 0.9, "kb-a"),
    ]
    layout = conversation(target, [{"role": "user", "content": "{context}\n\n{question}"}])
    result = assemble_records(records, target=target, layout=layout, question="Vault A?")
    assert sorted(p.chunk_id for p in result.placements) == ["doc-1", "doc-2"]
    report = placement_report(result, [r.id for r in records])
    assert report["merged_duplicates"] == [
        {"chunk_id": "doc-2", "kept": 2, "merged": [0], "document_id": "kb-a"}
    ]
    assert {p["document_index"] for p in report["placements"]} == {1, 2}
    order = reorder_records(records, profile=None)
    assert sorted(order) == [1, 2] and order[-1] == 2  # the merged copy, most relevant, last
    strict = _resolve(tokenizer=o200k, chat_format="chatml", budget_tokens=400,
                      options=AssemblyOptions(duplicate_ids="error"))  # fmt: skip
    with pytest.raises(InputError, match="duplicate id 'kb-a'"):
        assemble_records(records, target=strict, layout=layout, question="Vault A?")


@pytest.mark.parametrize(
    ("record", "match"),
    [
        (SourceRecord(None), r"nodes\[1\] has text NoneType"),
        (SourceRecord(b"x"), r"nodes\[1\] has text bytes"),
        (SourceRecord("x", "0.9"), r"nodes\[1\] has score '0.9'"),
        (SourceRecord("x", True), r"nodes\[1\] has score True"),
        (SourceRecord("x", float("nan")), r"nodes\[1\] has score nan"),
        (SourceRecord("x", 10**400), r"nodes\[1\] has a score too large"),
        (SourceRecord("x", evidence=3), r"nodes\[1\] has evidence 3"),
        (SourceRecord("x", evidence=[""]), r"nodes\[1\] has evidence"),
    ],
)
def test_bad_records_name_the_index(record, match):
    with pytest.raises(InputError, match=match):
        record_chunks([SourceRecord("ok"), record], what="nodes")
    with pytest.raises(InputError, match="must be a list"):
        record_chunks(None, what="nodes")  # type: ignore[arg-type]


def test_target_uses_the_profile_registry_and_its_cache(o200k):
    target = _resolve(
        tokenizer=o200k, chat_format="chatml", profile="deepseek-v4-flash-base", budget_tokens=9
    )
    assert target.profile is phaseaware.get_profile("deepseek-v4-flash-base")  # cached object
    assert _resolve(tokenizer="tiktoken:o200k_base", chat_format=None).chat_format is None
    assert target.options == AssemblyOptions() and target.append_options == AssemblyOptions(
        repeat=False
    )  # the core's append default when no options are given
    with pytest.raises(InputError, match="budget_tokens"):
        _resolve(tokenizer=o200k, chat_format="chatml", budget_tokens=0)
    with pytest.raises(InputError, match="profile must be"):
        _resolve(tokenizer=o200k, chat_format="chatml", profile=3)  # type: ignore[arg-type]
    with pytest.raises(InputError, match="chat_format must be"):
        _resolve(tokenizer=o200k, chat_format=3)  # type: ignore[arg-type]
    with pytest.raises(InputError, match="tokenizer must be"):
        _resolve(tokenizer=3, chat_format="chatml")  # type: ignore[arg-type]


def test_resolve_options():
    assert resolve_options({"pad": False}, position_offset=2) == AssemblyOptions(
        pad=False, position_offset=2
    )
    with pytest.raises(InputError, match="unknown options \\['padd'\\]"):
        resolve_options({"padd": True})
    with pytest.raises(InputError, match="options must be"):
        resolve_options(0)  # type: ignore[arg-type]


def test_report_is_to_dict_plus_index_and_id(o200k):
    target = _resolve(tokenizer=o200k, chat_format="chatml", budget_tokens=500)
    layout = conversation(target, [{"role": "user", "content": "{context}\n\n{question}"}])
    records = [SourceRecord("Helios-3 is disabled below 3.32 volts.", None, "kb")] * 2
    result = assemble_records(records, target=target, layout=layout, question=QUESTION)
    report = placement_report(result, [r.id for r in records])
    plain = result.to_dict()
    for p in report["placements"]:
        assert p.pop("document_id") == "kb" and p.pop("document_index") == 0
    (merged,) = report["merged_duplicates"]  # the same record twice: one, kept first
    assert merged.pop("document_id") == "kb" and (merged["kept"], merged["merged"]) == (0, [1])
    assert report == plain
    empty = assemble_records([], target=target, layout=layout, question=QUESTION)
    assert empty.placements == () and empty.dropped == ()


def test_slot_marker_conversation_equals_placeholder_conversation(o200k):
    target = _resolve(tokenizer=o200k, chat_format="chatml", budget_tokens=500)
    marked = conversation(target, [{"role": "user", "content": "S1\n\n" + QUESTION + " {x}"}],
                          slot_marker="S1")  # fmt: skip
    placeholder = conversation(
        target, [{"role": "user", "content": "{context}\n\n{question} {x}"}], question=QUESTION
    )
    assert marked.split(system=None, question=QUESTION) == placeholder.split(
        system=None, question=QUESTION
    )


def test_usage_check_names_the_callers_parameter(o200k):
    target = _resolve(tokenizer=o200k, chat_format="chatml", position_offset=1)
    assert check_usage(target, planned_tokens=5, reported_tokens=None, on_mismatch="raise") is None
    ok = check_usage(target, planned_tokens=5, reported_tokens=6, on_mismatch="raise")
    assert ok is not None and ok.ok
    with pytest.warns(PhaseawareWarning, match=r"set offset=3"):
        check_usage(target, planned_tokens=5, reported_tokens=8, on_mismatch="warn",
                    offset_name="offset")  # fmt: skip
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        check_usage(target, planned_tokens=5, reported_tokens=8, on_mismatch="ignore", offset=3)


TOOL = {
    "type": "function",
    "function": {"name": "search_notes", "description": "Search.", "parameters": {}},
}


def test_tools_go_into_the_plan_or_are_refused_with_the_fix(o200k, deepseek_v4):
    chatml = _resolve(tokenizer=o200k, chat_format="chatml")
    assert chatml.with_tools([]) is chatml
    with pytest.raises(UnsupportedSettingError, match="does not render tools.*; or pass x"):
        chatml.with_tools([TOOL], fix="; or pass x")
    fixed = _resolve(tokenizer=o200k, chat_format=chatml.require_format())
    with pytest.raises(UnsupportedSettingError, match="by name"):
        fixed.with_tools([TOOL])
    plain = _resolve(tokenizer=deepseek_v4, chat_format="deepseek-v4", budget_tokens=4000)
    tooled = plain.with_tools([TOOL])
    assert tooled.settings is not None and tooled.settings.tools == (TOOL,)
    messages = [{"role": "user", "content": "{context}\n\n{question}"}]
    records = [SourceRecord("Helios-3 is disabled below 3.32 volts.")]
    results = [
        assemble_records(records, target=t, layout=conversation(t, messages), question=QUESTION)
        for t in (plain, tooled)
    ]
    assert "search_notes" in results[1].prompt and "search_notes" not in results[0].prompt
    assert results[1].token_count > results[0].token_count


def test_refuse_tools_names_the_fix(o200k):
    from phaseaware.errors import UnsupportedRequestError
    from phaseaware.integrate import refuse_tools

    target = _resolve(tokenizer=o200k, chat_format="chatml")
    refuse_tools(target, None, fix="x")
    refuse_tools(target, [], fix="x")
    with pytest.raises(UnsupportedRequestError, match="binds 1 tool.*pass tool_schemas"):
        refuse_tools(target, [object()], fix="pass tool_schemas='not_rendered'")


def test_rank_records_takes_the_most_relevant_within_top_k_and_the_token_budget(o200k):
    from phaseaware.integrate import rank_records

    texts = ["alpha beta", "gamma", "delta epsilon zeta", "eta", "theta iota"]
    records = [SourceRecord(t, s, f"id{i}") for i, (t, s) in enumerate(
        zip(texts, [0.1, 0.9, 0.5, None, 0.7], strict=True))]  # fmt: skip
    records.append(SourceRecord("gamma", 0.2, "id1"))  # a copy: merged, 0.9 kept
    everything = rank_records(records, profile=None)
    assert sorted(everything) == [0, 1, 2, 3, 4] and everything[-1] == 1
    assert sorted(rank_records(records, profile=None, top_k=2)) == [1, 4]
    sizes = {i: len(o200k.encode(t)) for i, t in enumerate(texts)}
    budget = sizes[1] + sizes[4]
    assert sorted(rank_records(records, profile=None, token_budget=budget, tokenizer=o200k)) == [
        1, 4,
    ]  # fmt: skip
    assert rank_records(records, profile=None, token_budget=sizes[1], tokenizer=o200k) == (1,)
    profile = phaseaware.get_profile("deepseek-v4-flash-base")
    assert rank_records(records, profile=profile) == (3, 0, 2, 4, 1)  # ascending relevance
    with pytest.raises(InputError, match="top_k must be an integer > 0"):
        rank_records(records, profile=None, top_k=0)
    with pytest.raises(InputError, match="pass the tokenizer"):
        rank_records(records, profile=None, token_budget=5)
