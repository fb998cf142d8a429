"""Bad conversations: typed errors naming the fix, from the Python API and the CLI alike.

The CLI runs in-process (``phaseaware.cli.main.main``): exit 1 and exactly one
``phaseaware: error: ...`` line on stderr, never a traceback.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from phaseaware import assemble, audit_messages, get_profile
from phaseaware.chat import (
    DuplicateSlotError,
    MissingSlotError,
    TemplateRewriteError,
    ToolResultError,
    UnknownRoleError,
)
from phaseaware.cli.main import main
from tests.unit.chat.test_chat_properties import _v3_tokenizer

EXAMPLES = Path(__file__).resolve().parents[3] / "examples"
NO_SLOT = [{"role": "system", "content": "Be brief."}, {"role": "user", "content": "{question}"}]
TWO_SLOTS = [{"role": "system", "content": "{context}"}, {"role": "user", "content": "{context}"}]
BAD_ROLE = [{"role": "bot", "content": "{context}"}]  # developer is a DeepSeek-V4 role now
ORPHAN_TOOL = [
    {"role": "user", "content": "find it"},
    {"role": "tool", "tool_call_id": "call_1", "content": "{context}"},
]
BAD = [
    (NO_SLOT, MissingSlotError, "put the literal {context}"),
    (TWO_SLOTS, DuplicateSlotError, "keep exactly one {context}"),
    (BAD_ROLE, UnknownRoleError, "use one of system, user, assistant, tool"),
    (ORPHAN_TOOL, ToolResultError, "after an assistant message with tool_calls"),
]


@pytest.mark.parametrize("messages, error, fix", BAD)
def test_python_api_raises_typed_errors(deepseek_v4, messages, error, fix):
    with pytest.raises(error, match=fix.replace("{", r"\{").replace("}", r"\}")):
        assemble(
            ["some text"], messages=messages, tokenizer=deepseek_v4, chat_format="deepseek-v4",
            question="q", budget_tokens=500,
        )  # fmt: skip


def test_hf_template_that_moves_a_message_is_named():
    tokenizer = _v3_tokenizer()  # DeepSeek-V3's template moves every system message first
    messages = [{"role": "user", "content": "hi"}, {"role": "system", "content": "{context}"}]
    with pytest.raises(TemplateRewriteError, match="message 1 \\(system\\)") as info:
        assemble(
            ["some text"], messages=messages, tokenizer=tokenizer, chat_format="hf", question="q",
            budget_tokens=500,
        )  # fmt: skip
    assert info.value.change == "moved"


def _request(tmp_path: Path, messages, **extra) -> str:
    doc = json.loads((EXAMPLES / "request_messages.json").read_text(encoding="utf-8"))
    doc["messages"] = messages
    doc.update(extra)
    path = tmp_path / "request.json"
    path.write_text(json.dumps(doc), encoding="utf-8")
    return str(path)


def _one_line_error(capsys, argv: list[str]) -> str:
    assert main(argv) == 1
    err = capsys.readouterr().err
    assert "Traceback" not in err
    lines = err.strip().splitlines()
    assert len(lines) == 1, err
    return lines[0]


@pytest.mark.parametrize("messages, error, fix", BAD)
def test_cli_assemble_errors_are_one_line(tmp_path, capsys, messages, error, fix):
    line = _one_line_error(capsys, ["assemble", _request(tmp_path, messages)])
    assert line.startswith("phaseaware: error: ")
    assert fix in line


def test_cli_assemble_rejects_system_with_messages(tmp_path, capsys):
    path = _request(tmp_path, [{"role": "user", "content": "{context}"}], system="Be brief.")
    assert "either 'system' or 'messages'" in _one_line_error(capsys, ["assemble", path])


def test_cli_assemble_with_messages(capsys):
    assert main(["assemble", str(EXAMPLES / "request_messages.json"), "--json"]) == 0
    doc = json.loads(capsys.readouterr().out)
    request = json.loads((EXAMPLES / "request_messages.json").read_text(encoding="utf-8"))
    assert len(doc["messages"]) == len(request["messages"])
    last = request["messages"][-1]["content"].replace("{question}", request["question"])
    assert doc["messages"][-1]["content"] == last
    assert doc["messages"][0]["content"].endswith(doc["context"])
    assert doc["prompt"].count(doc["context"]) == 1
    assert doc["placements"]


AUDIT = [
    "audit", "--messages", str(EXAMPLES / "long_system_prompt.json"), "--chat-format", "deepseek-v4",
    "--tokenizer", "deepseek-v4", "--profile", "deepseek-v4-flash-base",
]  # fmt: skip


def test_cli_audit_fail_under_is_a_ci_guard(capsys, deepseek_v4):
    example = json.loads((EXAMPLES / "long_system_prompt.json").read_text(encoding="utf-8"))
    result = audit_messages(
        example["messages"], tokenizer=deepseek_v4, profile=get_profile("deepseek-v4-flash-base"),
        evidence=example["evidence"], chat_format="deepseek-v4",
    )  # fmt: skip
    assert not result.missing
    assert {o.evidence for o in result.occurrences} == set(example["evidence"])
    assert all(o.message_index == 0 and o.role == "system" for o in result.occurrences)
    ids = deepseek_v4.encode(_render(example["messages"], deepseek_v4))
    for o in result.occurrences:  # absolute positions, confirmed by decoding
        assert len(deepseek_v4.decode(ids[: o.token_position])) <= o.char_offset
        assert o.char_offset < len(deepseek_v4.decode(ids[: o.token_position + 1]))
    worst = min(o.expected_accuracy for o in result.occurrences)
    line = _one_line_error(capsys, [*AUDIT, "--fail-under", repr(worst + 1e-9)])
    assert line.startswith("phaseaware: audit failed: ")
    assert "in message 0 (system)" in line
    assert main([*AUDIT, "--fail-under", repr(worst)]) == 0
    out = capsys.readouterr().out
    assert "conversation: 2 messages, chat format deepseek-v4" in out
    assert out.count(" system ") == len(result.occurrences)


def _render(messages, tokenizer) -> str:
    from phaseaware.chat import get_chat_format, parse_messages

    return get_chat_format("deepseek-v4", tokenizer).render(parse_messages(messages))


def test_cli_audit_fills_the_slot_from_prompt_file(tmp_path, capsys):
    conversation = tmp_path / "c.json"
    conversation.write_text(
        json.dumps([{"role": "system", "content": "Docs:\n{context}"},
                    {"role": "user", "content": "{question}"}]), encoding="utf-8",
    )  # fmt: skip
    context = tmp_path / "context.txt"
    context.write_text("The code is 4471.", encoding="utf-8")
    argv = [
        "audit", str(context), "--messages", str(conversation), "--chat-format", "chatml",
        "--tokenizer", "tiktoken:cl100k_base", "--profile", "deepseek-v4-flash-base",
        "--evidence", "4471", "--evidence", "absent", "--question", "Which code?", "--json",
        "--allow-tokenizer-mismatch",  # cl100k with a DeepSeek profile: opted in explicitly
    ]  # fmt: skip
    assert main(argv) == 1  # the report is printed; missing evidence fails (issue 16)
    doc = json.loads(capsys.readouterr().out)
    assert doc["missing"] == ["absent"]
    (occ,) = doc["occurrences"]
    assert (occ["message_index"], occ["role"]) == (0, "system")
    line = _one_line_error(capsys, [*argv, "--fail-under", "0"])
    assert "evidence not found: 'absent'" in line


def test_cli_audit_fail_under_on_a_plain_prompt(capsys):
    argv = [
        "audit", str(EXAMPLES / "prompt.txt"), "--tokenizer", "deepseek-v4",
        "--profile", "deepseek-v4-flash-base", "--evidence", "3.62 volts",
    ]  # fmt: skip
    assert main([*argv, "--fail-under", "0.5"]) == 0
    capsys.readouterr()
    line = _one_line_error(capsys, [*argv, "--fail-under", "0.99"])
    assert line.startswith("phaseaware: audit failed: ") and "lower --fail-under" in line
