"""PhaseAwareChatPromptBuilder: ChatPromptBuilder's template, phaseaware's exact messages."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest
from haystack import Document, Pipeline
from haystack.components.builders import ChatPromptBuilder
from haystack.dataclasses import ChatMessage
from haystack_integrations.components.builders.phaseaware import PhaseAwareChatPromptBuilder
from haystack_integrations.utils.phaseaware import message_dicts
from hypothesis import given, settings
from hypothesis import strategies as st

import phaseaware
import phaseaware.integrate as kit
from phaseaware.errors import InputError

QUESTION = "What is the access code for Priya ?"
LOOP = "{% for document in documents %}\n    {{ document.content }}\n{% endfor %}"
TEMPLATE = [
    ChatMessage.from_system("Answer with the code only."),
    ChatMessage.from_user(f"Context:\n{LOOP}\n\nQuestion: {{{{ question }}}} ({{{{ style }}}})"),
]
TEXTS = [
    "river waits . The access code for Priya is 317 . A late tower rests .",
    "station fades . The access code for Hugo is 204 . One green lamp rests .",
    "kitchen turns beside that open harbor . The access code for Mira is 550 .",
]
COMMON: dict[str, Any] = dict(
    tokenizer="tiktoken:o200k_base", chat_format="chatml", profile="deepseek-v4-flash-base",
    budget_tokens=600, options={"allow_tokenizer_mismatch": True},
)  # fmt: skip


def _docs() -> list[Document]:
    return [
        Document(content=TEXTS[0], score=0.9, id="p", meta={"evidence": ["317"]}),
        Document(content=TEXTS[1], score=0.4, id="h"),
        Document(content=TEXTS[2], id="m"),
    ]


def test_messages_are_the_plan_and_the_rest_is_chat_prompt_builders() -> None:
    builder = PhaseAwareChatPromptBuilder(TEMPLATE, **COMMON)
    out = builder.run(documents=_docs(), question=QUESTION, style="short")
    prompt, report = out["prompt"], out["report"]
    plain = ChatPromptBuilder(template=TEMPLATE).run(
        documents=[], question=QUESTION, style="short"
    )["prompt"]
    assert prompt[0] == plain[0]  # the system message: ChatPromptBuilder's own rendering
    head, tail = plain[1].text.split("Context:\n")[0], plain[1].text.split("\n\nQuestion:")[-1]
    assert prompt[1].text.startswith(head + "Context:\n") and prompt[1].text.endswith(tail)
    assert report["context"] in prompt[1].text
    target = builder.target
    rendered = target.require_format().render(
        phaseaware.chat.parse_messages(message_dicts(prompt)), add_generation_prompt=True
    )
    assert rendered == report["prompt"]  # the messages render to exactly the planned prompt
    assert kit.rendered_tokens(target, message_dicts(prompt)) == report["token_count"]
    ids = {p["document_id"] for p in report["placements"]}
    assert ids == {"p", "h", "m"} and report["merged_duplicates"] == []
    for p in report["placements"]:
        assert report["prompt"][p["char_start"] : p["char_end"]] == TEXTS[p["document_index"]]


def test_string_templates_and_whitespace_control_work_as_in_chat_prompt_builder() -> None:
    template = (
        '{% message role="user" %}Notes:\n{%- for d in documents -%} {{ d.content }} {%- endfor -%}'
        "\n\n{{ question }}{% endmessage %}"
    )
    out = PhaseAwareChatPromptBuilder(template, **COMMON).run(documents=_docs(), question=QUESTION)
    (message,) = out["prompt"]
    assert message.text == "Notes:" + out["report"]["context"] + QUESTION


def test_template_errors_name_the_fix() -> None:
    with pytest.raises(kit.MissingSlotError, match="no loop over 'documents'"):
        PhaseAwareChatPromptBuilder([ChatMessage.from_user("{{ question }}")], **COMMON)
    with pytest.raises(kit.DuplicateSlotError, match="2 times"):
        PhaseAwareChatPromptBuilder([ChatMessage.from_user(LOOP + LOOP)], **COMMON)
    labelled = "{% for d in documents %}Doc {{ loop.index }}: {{ d.content }}{% endfor %}"
    with pytest.raises(InputError, match=r"it may write \{\{ d.content \}\} only"):
        PhaseAwareChatPromptBuilder([ChatMessage.from_user(labelled)], **COMMON)
    with pytest.raises(InputError, match="reserves"):
        PhaseAwareChatPromptBuilder(
            [ChatMessage.from_user(LOOP + "{{ phaseaware_context }}")], **COMMON
        )
    with pytest.raises(InputError, match="of role 'assistant'; ChatPromptBuilder renders"):
        PhaseAwareChatPromptBuilder([ChatMessage.from_assistant(LOOP)], **COMMON)
    builder = PhaseAwareChatPromptBuilder([ChatMessage.from_user(LOOP)], **COMMON)
    with pytest.raises(InputError, match=r"documents\[0\] \(id 'x'\) holds no text"):
        builder.run(documents=[Document(id="x", content=None)], question=QUESTION)


def test_copies_merge_and_different_texts_under_one_id_are_refused() -> None:
    builder = PhaseAwareChatPromptBuilder(TEMPLATE, **COMMON)
    docs = [*_docs(), Document(content=TEXTS[1], score=0.8, id="h")]  # a second retriever's copy
    report = builder.run(documents=docs, question=QUESTION, style="s")["report"]
    assert [(m["document_id"], m["kept"], m["merged"]) for m in report["merged_duplicates"]] == [
        ("h", 3, [1])
    ]
    assert sorted(p["document_index"] for p in report["placements"]) == [0, 2, 3]
    bad = [*_docs(), Document(content="other", id="h")]
    with pytest.raises(InputError, match="documents\\[1\\] and documents\\[3\\] share the id 'h'"):
        builder.run(documents=bad, question=QUESTION, style="s")
    strict = PhaseAwareChatPromptBuilder(TEMPLATE, **{**COMMON, "options": {
        "allow_tokenizer_mismatch": True, "duplicate_ids": "error"}})  # fmt: skip
    with pytest.raises(InputError, match="duplicate id 'h'"):
        strict.run(documents=docs, question=QUESTION, style="s")


def test_no_documents_give_the_template_with_an_empty_context() -> None:
    """The loop's whitespace (before and after the content) is written once, as around
    any context: here ``"\n    "`` and ``"\n"``."""
    out = PhaseAwareChatPromptBuilder(TEMPLATE, **COMMON).run(
        documents=[], question=QUESTION, style="s"
    )
    assert out["prompt"][1].text == f"Context:\n\n    \n\n\nQuestion: {QUESTION} (s)"
    assert out["report"]["placements"] == [] and out["report"]["dropped"] == []


def test_run_async_gives_what_run_gives() -> None:
    builder = PhaseAwareChatPromptBuilder(TEMPLATE, **COMMON)
    sync = builder.run(documents=_docs(), question=QUESTION, style="s")
    done = asyncio.run(builder.run_async(documents=_docs(), question=QUESTION, style="s"))
    assert done == sync


def test_a_pipeline_survives_a_yaml_round_trip_with_the_same_messages() -> None:
    pipe = Pipeline()
    pipe.add_component("builder", PhaseAwareChatPromptBuilder(TEMPLATE, **COMMON))
    data = {"builder": {"documents": _docs(), "question": QUESTION, "style": "s"}}
    before = pipe.run(data)["builder"]
    loaded = Pipeline.loads(pipe.dumps())
    after = loaded.run(data)["builder"]
    assert after["prompt"] == before["prompt"] and after["report"] == before["report"]
    params = loaded.get_component("builder").to_dict()["init_parameters"]
    assert params["tokenizer"] == "tiktoken:o200k_base" and params["options"] == COMMON["options"]


def test_objects_serialise_as_their_plain_form_or_are_refused() -> None:
    tokenizer = phaseaware.load_tokenizer("tiktoken:o200k_base")
    options = phaseaware.AssemblyOptions(allow_tokenizer_mismatch=True, offsets=(0, 1))
    builder = PhaseAwareChatPromptBuilder(
        TEMPLATE, **{**COMMON, "tokenizer": tokenizer, "options": options}
    )
    params = builder.to_dict()["init_parameters"]
    assert params["tokenizer"] == "tiktoken:o200k_base" and params["options"]["offsets"] == [0, 1]
    again = PhaseAwareChatPromptBuilder.from_dict(builder.to_dict())
    assert again.target.options == builder.target.options
    profiled = PhaseAwareChatPromptBuilder(
        TEMPLATE, **{**COMMON, "profile": phaseaware.get_profile("deepseek-v4-flash-base")}
    )
    with pytest.raises(InputError, match="profile=Profile cannot be written"):
        profiled.to_dict()


def test_generation_kwargs_state_the_planned_chat_settings() -> None:
    assert PhaseAwareChatPromptBuilder(TEMPLATE, **COMMON).generation_kwargs() == {}
    thinking = PhaseAwareChatPromptBuilder(
        TEMPLATE, **{**COMMON, "tokenizer": "deepseek-v4", "chat_format": "deepseek-v4",
                     "thinking": True},
    )  # fmt: skip
    assert thinking.generation_kwargs() == {
        "extra_body": {"chat_template_kwargs": thinking.target.chat_template_kwargs()}
    }


@settings(max_examples=30, deadline=None)
@given(
    lead=st.sampled_from(["", "\n", "\n\n", "  "]),
    trail=st.sampled_from(["", "\n", "\n\n", " "]),
    dashes=st.tuples(*[st.sampled_from(["", "-"])] * 6),
    n=st.integers(0, 3),
)
def test_without_reordering_the_messages_are_chat_prompt_builders(lead, trail, dashes, n) -> None:
    """Strategy "none", no pads, no restated evidence: where the loop body's whitespace
    joins documents as phaseaware does (``trail + lead == "\\n\\n"``), the messages equal
    ChatPromptBuilder's byte for byte, Jinja's whitespace control included."""
    o, a, sl, st_, b, c = dashes
    loop = (
        f"{{%{o} for d in documents {a}%}}{lead}{{{{{sl} d.content {st_}}}}}{trail}"
        f"{{%{b} endfor {c}%}}"
    )
    template = [ChatMessage.from_user(f"Notes: \n{loop}\n Question: {{{{ question }}}}")]
    options = {"strategy": "none", "pad": False, "repeat": False, "length_pad": False}
    ours = PhaseAwareChatPromptBuilder(template, **{**COMMON, "profile": None, "options": options})
    docs = _docs()[:n]
    got = ours.run(documents=docs, question=QUESTION)["prompt"]
    want = ChatPromptBuilder(template=template).run(documents=docs, question=QUESTION)["prompt"]
    lead_kept = "" if a or sl else lead
    trail_kept = "" if b or st_ else trail
    joins_alike = trail_kept + lead_kept == "\n\n"  # phaseaware's separator
    if n == 1 or (n > 1 and joins_alike) or (n == 0 and lead_kept + trail_kept == ""):
        assert got[0].text == want[0].text
    else:  # the same text, only the whitespace between documents (or around none) differs
        assert "".join(got[0].text.split()) == "".join(want[0].text.split())
