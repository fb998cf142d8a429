"""Hostile input, round 5 (issue 38): ``compare``'s questions file and regex grader.

The cases that found the causes: a valid questions file holding U+2028, U+2029 and U+0085
inside its JSON strings (``json.dumps(..., ensure_ascii=False)`` writes them as they are)
refused as "Unterminated string" (``str.splitlines``); a catastrophic ``--grader regex``
answer that never finished on an ordinary completion; ``--plot`` checked after every
request was sent.
"""

from __future__ import annotations

import json
import shutil
import time
from pathlib import Path

import pytest

from phaseaware.compare.grade import load_grader
from phaseaware.compare.questions import read_questions
from phaseaware.errors import InputError
from phaseaware.profiles.registry import builtin_profile_dir
from phaseaware.userfiles import jsonl_lines
from tests.support.cli_run import run_cli


def _question(i: int, text: str = "what?", answer: str = "42") -> dict[str, object]:
    return {"id": f"q{i}", "question": text, "answer": [answer],
            "chunks": [{"id": "a", "text": f"alpha {answer}", "evidence": [answer]}]}  # fmt: skip


def test_unicode_line_separators_inside_json_strings_are_no_line_breaks(tmp_path):
    lines = [json.dumps(_question(i, f"what\u2028is\u2029it\x85{i}?"), ensure_ascii=False)
             for i in range(3)]  # fmt: skip
    path = tmp_path / "q.jsonl"
    path.write_bytes(("\r\n".join(lines) + "\r\n").encode("utf-8"))  # \r\n tolerated too
    questions = read_questions(path)
    assert [q.id for q in questions] == ["q0", "q1", "q2"]
    assert questions[1].question == "what\u2028is\u2029it\x851?"


def test_jsonl_lines_split_at_newline_only():
    assert jsonl_lines('{"a": "x\u2028y"}\r\n\n{"b": 1}') == ['{"a": "x\u2028y"}', "", '{"b": 1}']
    assert jsonl_lines("") == [] and jsonl_lines("a\n") == ["a"]


def test_a_catastrophic_regex_answer_stops_at_its_time_limit():
    grade = load_grader("regex")
    start = time.monotonic()
    with pytest.raises(InputError, match=r"'\(a\|aa\)\+\$'.*1 s time limit"):
        grade("a" * 40 + "!", ["(a|aa)+$"])
    assert time.monotonic() - start < 5
    assert grade("The answer is 42.", [r"\b42\b"]) and not grade("no", ["42"])


@pytest.fixture()
def compare_folder(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.chdir(tmp_path)
    (tmp_path / "r5_backend.py").write_text(
        "CALLS = []\n\ndef answer(prompt):\n    CALLS.append(1)\n    return 'a' * 40 + '!'\n",
        encoding="utf-8",
    )
    monkeypatch.syspath_prepend(str(tmp_path))
    shutil.copy(builtin_profile_dir() / "deepseek-v4-flash-base.json", tmp_path / "prof.json")
    return tmp_path


COMPARE = ["compare", "q.jsonl", "--budget-tokens", "200", "--tokenizer", "deepseek-v4",
           "--chat-format", "deepseek-v4", "--profile", "./prof.json", "--fresh",
           "--backend", "callable", "--model", "r5_backend:answer", "--log", "c.jsonl"]  # fmt: skip


def test_compare_grader_regex_has_a_time_limit(compare_folder, capsys):
    pytest.importorskip("scipy")
    (compare_folder / "q.jsonl").write_text(json.dumps(_question(0, answer="(a|aa)+$")) + "\n")
    start = time.monotonic()
    code, _, err = run_cli([*COMPARE, "--grader", "regex"], capsys)
    assert code == 1 and "time limit" in err and "(a|aa)+$" in err
    assert time.monotonic() - start < 60


def test_compare_checks_the_plot_format_before_any_request(compare_folder, capsys):
    pytest.importorskip("scipy")
    pytest.importorskip("matplotlib")
    import r5_backend  # type: ignore[import-not-found]

    (compare_folder / "q.jsonl").write_text(json.dumps(_question(0)) + "\n")
    code, _, err = run_cli([*COMPARE, "--plot", "chart.docx"], capsys)
    assert code == 1 and ".docx" in err and r5_backend.CALLS == []
