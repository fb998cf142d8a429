"""The kit's readers of framework values, a compressor's fixed prompt and a prompt step's slot."""

from __future__ import annotations

import json
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from phaseaware.errors import InputError
from phaseaware.integrate import (
    CHUNK_SEPARATOR,
    SUMMARY_KEYS,
    AssemblyRequest,
    SourceRecord,
    content_text,
    conversation,
    fill_slot,
    fixed_prompt,
    metadata_record,
    slot_marker,
    target_keywords,
    target_of,
    tool_call_dict,
    tools_fix,
)

QUESTION = "Below which voltage is a Helios-3 module disabled?"
NOTES = [f"Note {i}: the Helios-{i} module is disabled below 3.{i}2 volts." for i in range(4)]


def test_content_text_joins_text_parts_and_refuses_others():
    assert content_text("plain", where="message 0") == "plain"
    parts: list[object] = ["a", {"type": "text", "text": "b"}, {"type": "text"}]
    assert content_text(parts, where="message 0") == "ab"
    with pytest.raises(InputError, match=r"message 2 holds a non-text content part"):
        content_text([{"type": "image_url", "image_url": "x"}], where="message 2")


@given(args=st.dictionaries(st.text(max_size=5), st.text(max_size=5), max_size=3))
def test_tool_call_dict_serializes_like_the_client(args: dict[str, str]):
    ascii_call = tool_call_dict("c0", "search", args)
    raw_call = tool_call_dict("c0", "search", args, ensure_ascii=False)
    assert ascii_call["function"]["arguments"] == json.dumps(args)
    assert raw_call["function"]["arguments"] == json.dumps(args, ensure_ascii=False)
    assert tool_call_dict(None, "f", '{"q": 1}') == {
        "id": None,
        "type": "function",
        "function": {"name": "f", "arguments": '{"q": 1}'},
    }


def test_metadata_record_reads_the_first_score_and_the_evidence():
    meta = {"score": None, "relevance_score": 0.5, "evidence": "3.02 volts"}
    assert metadata_record("t", meta, id="d", where="documents[0]") == SourceRecord(
        "t", 0.5, "d", "3.02 volts"
    )
    assert metadata_record("t", None, where="documents[0]") == SourceRecord("t")
    unscored = metadata_record("t", {"evidence": "x"}, evidence_key=None, where="documents[0]")
    assert unscored == SourceRecord("t")
    with pytest.raises(InputError, match=r"documents\[3\]\.metadata is a list"):
        metadata_record("t", [1], where="documents[3]")


def test_fixed_prompt_texts_join_to_the_assembled_context(o200k):
    prefix, suffix = "<|im_start|>system\nNotes:\n", "<|im_end|>\n"
    request = AssemblyRequest(tokenizer=o200k, chat_format=None, profile=None, budget_tokens=400)
    fixed = fixed_prompt(request, prefix=prefix, prefix_tokens=None, suffix=suffix)
    records = [SourceRecord(t, 1.0 - i / 10, f"n{i}") for i, t in enumerate(NOTES)]
    out = fixed.compress(records, ids=[r.id for r in records], question=QUESTION)
    assert sorted(c.index for c in out) == list(range(len(NOTES)))
    assert all(NOTES[c.index] in c.text for c in out)
    summary = out[0].summary
    assert set(SUMMARY_KEYS) <= set(summary) and summary["exact_prefix"] is True
    prompt = prefix + CHUNK_SEPARATOR.join(c.text for c in out) + suffix
    assert summary["token_count"] == len(o200k.encode(prompt))
    assert fixed.compress([], ids=[], question=QUESTION) == []
    counted = fixed_prompt(request, prefix=None, prefix_tokens=5)
    assert counted.exact_prefix is False and counted.target.usage_offsets[0] == 5
    with pytest.raises(InputError, match="exactly one of prefix"):
        fixed_prompt(request, prefix="a", prefix_tokens=2)


def test_fill_slot_writes_the_context_into_the_marked_message(o200k):
    args: dict[str, Any] = {"tokenizer": o200k, "chat_format": "chatml", "profile": None}
    target = target_of({**args, "budget_tokens": 400})
    marker = slot_marker()
    assert marker != slot_marker()
    messages = [
        {"role": "system", "content": f"Notes {{kept}}:\n{marker}"},
        {"role": "user", "content": QUESTION},
    ]
    layout = conversation(target, messages, slot_marker=marker)
    slot = fill_slot(layout, [SourceRecord(t) for t in NOTES], target=target, question=QUESTION)
    assert slot.index == 0 and slot.content.startswith("Notes {kept}:\n")
    assert slot.result.context in slot.content and marker not in slot.content
    assert target_keywords(target) == (
        "tokenizer='tiktoken:o200k_base', chat_format='chatml', profile=None, budget_tokens=400"
    )


def test_tools_fix_names_the_adapter_and_whether_usage_verifies():
    assert tools_fix("X").endswith("(the usage check verifies it)")
    assert tools_fix("X", verified=False).endswith("schemas into the prompt")
