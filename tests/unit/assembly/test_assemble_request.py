"""One door: ``assemble`` and ``assemble_append`` take the shared arguments as keywords or as
one ``AssemblyRequest``, with specs or objects, and give the same result either way."""

from __future__ import annotations

import dataclasses

import pytest

import phaseaware
from phaseaware import AssemblyOptions, AssemblyRequest, ChatSettings, assemble, assemble_append
from phaseaware.errors import InputError

DOCS = ["The vault code is 4417-B.", "Unrelated text about harbors and rivers."]
QUESTION = "What is the vault code?"


def test_the_public_surface_has_one_door_each():
    names = set(phaseaware.__all__)
    assert {"assemble", "assemble_append", "AssemblyRequest"} <= names
    assert not names & {"assemble_from_specs", "assemble_conversation", "assemble_append_after"}


def test_request_and_keywords_and_specs_and_objects_agree(deepseek_v4):
    profile = phaseaware.get_profile("deepseek-v4-flash-base")
    by_spec = assemble(
        DOCS, question=QUESTION, tokenizer="deepseek-v4", chat_format="deepseek-v4",
        profile="deepseek-v4-flash-base", budget_tokens=800, options={"repeat": False},
    )  # fmt: skip
    request = AssemblyRequest(
        tokenizer=deepseek_v4, chat_format="deepseek-v4", profile=profile, budget_tokens=800,
        options=AssemblyOptions(repeat=False),
    )  # fmt: skip
    by_request = assemble(DOCS, question=QUESTION, request=request)
    assert by_spec.prompt == by_request.prompt and by_spec.placements == by_request.placements
    # messages: the same door, the caller's conversation
    messages = [{"role": "user", "content": "{context}\n\n{question}"}]
    single = assemble(DOCS, question=QUESTION, request=request)
    chat = assemble(DOCS, question=QUESTION, request=request, messages=messages)
    assert chat.prompt == single.prompt  # the single-turn call is this conversation


def test_request_and_keywords_exclude_each_other(deepseek_v4):
    request = AssemblyRequest(tokenizer=deepseek_v4, budget_tokens=500)
    with pytest.raises(InputError, match="either request= or its fields"):
        assemble(DOCS, question=QUESTION, request=request, budget_tokens=400)
    with pytest.raises(InputError, match="tokenizer="):
        assemble(DOCS, question=QUESTION, budget_tokens=400)
    with pytest.raises(InputError, match="budget_tokens"):
        assemble(DOCS, question=QUESTION, tokenizer=deepseek_v4)
    with pytest.raises(InputError, match="thinking=True disagrees"):
        assemble(
            DOCS, question=QUESTION, tokenizer=deepseek_v4, chat_format="deepseek-v4",
            budget_tokens=500, thinking=True, settings=ChatSettings(),
        )  # fmt: skip


def test_position_offset_is_the_options_field(deepseek_v4):
    request = AssemblyRequest(tokenizer=deepseek_v4, budget_tokens=500, position_offset=1)
    resolved = request.resolve()
    assert resolved.options == AssemblyOptions(position_offset=1)
    result = assemble(DOCS, question=QUESTION, request=request)
    assert result.position_offset == 1
    with pytest.raises(InputError, match="position_offset"):
        dataclasses.replace(request, position_offset=-1).resolve()


def test_append_takes_the_sent_messages_or_their_count(deepseek_v4):
    request = AssemblyRequest(
        tokenizer=deepseek_v4, chat_format="deepseek-v4", profile="deepseek-v4-flash-base",
        budget_tokens=4000,
    )  # fmt: skip
    sent = [
        {"role": "user", "content": "Find the code."},
        {"role": "assistant", "content": "Looking.", "tool_calls": [
            {"id": "c1", "type": "function", "function": {"name": "search", "arguments": "{}"}}
        ]},
    ]  # fmt: skip
    new = {"role": "tool", "tool_call_id": "c1", "content": "{context}"}
    full = assemble_append(sent=sent, new=new, chunks=DOCS, question=QUESTION, request=request)
    assert full.messages is not None and len(full.messages) == 3
    assert full.token_count == len(deepseek_v4.encode(full.prompt))
    # the count form (checked against the full form in test_conversation_append)
    held = full.prompt[: full.prompt.index("Looking.") + len("Looking.")]
    count = assemble_append(
        prefix_tokens=len(deepseek_v4.encode(held)) + 1, new=new, chunks=DOCS,
        question=QUESTION, request=request,
    )  # fmt: skip
    assert count.messages is not None and len(count.messages) == 1
    with pytest.raises(InputError, match="exactly one of sent= .* prefix_tokens="):
        assemble_append(new=new, chunks=DOCS, question=QUESTION, request=request)
    with pytest.raises(InputError, match="exactly one of sent="):
        assemble_append(
            sent=sent, prefix_tokens=10, new=new, chunks=DOCS, question=QUESTION, request=request
        )
