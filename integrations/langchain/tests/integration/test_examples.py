"""Both LangChain examples answer right, in process, against the session's reference
server and profile (no second model load, no calibration): each prints every answer
against the expected one and returns 1 when one is wrong."""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path

import pytest

pytest.importorskip("rank_bm25")
pytest.importorskip("langchain_openai")
pytestmark = [pytest.mark.slow, pytest.mark.needs_trained_reference]

EXAMPLES = Path(__file__).resolve().parents[4] / "examples"


def _load(name: str, monkeypatch: pytest.MonkeyPatch):
    monkeypatch.syspath_prepend(str(EXAMPLES))  # langchain_common, reference_server
    spec = importlib.util.spec_from_file_location(name, EXAMPLES / f"{name}.py")
    module = importlib.util.module_from_spec(spec)
    monkeypatch.setitem(sys.modules, name, module)
    spec.loader.exec_module(module)
    return module


def _profile(reference_profile, tmp_path) -> str:
    from phaseaware.profiles.io import save_profile

    path = tmp_path / "reference.json"
    save_profile(reference_profile, path)
    return str(path)


def test_rag_example_answers_every_question_right(
    served, reference_profile, tmp_path, capsys, monkeypatch
):
    module = _load("langchain_rag", monkeypatch)
    argv = ["--base-url", served.base_url, "--profile", _profile(reference_profile, tmp_path)]
    status = module.main(argv)
    out = capsys.readouterr().out
    common = sys.modules["langchain_common"]
    _, questions = common.local_notes()
    for q in questions[:4]:
        assert f"{q.question}  ->  '{q.answer}'  (expected {q.answer}: OK)" in out, out
    assert "4 of 4 answers right" in out
    assert out.count("usage.prompt_tokens checked") == 4
    assert status == 0


def test_rag_example_corpus_never_contradicts_itself(monkeypatch):
    import re

    _load("langchain_rag", monkeypatch)
    corpus, questions = sys.modules["langchain_common"].local_notes()
    facts: dict[str, str] = {}
    for doc in corpus:
        for name, code in re.findall(r"The access code for (\S+) is (\S+) \.", doc.page_content):
            assert facts.setdefault(name, code) == code, (name, facts[name], code)
    assert all(facts[q.key_name] == q.answer for q in questions)


def test_a_wrong_answer_exits_non_zero(served, reference_profile, tmp_path, capsys, monkeypatch):
    module = _load("langchain_rag", monkeypatch)
    common = sys.modules["langchain_common"]
    real = common.local_notes

    def lying_notes(*args, **kwargs):
        corpus, questions = real(*args, **kwargs)
        from dataclasses import replace

        return corpus, [replace(questions[0], answer="999"), *questions[1:]]

    monkeypatch.setattr(module, "local_notes", lying_notes)
    argv = ["--base-url", served.base_url, "--profile", _profile(reference_profile, tmp_path)]
    assert module.main([*argv, "--questions", "1"]) == 1
    assert "(expected 999: WRONG)" in capsys.readouterr().out


def test_agent_example_answers_right_and_resends_the_aligned_bytes(
    served, reference_profile, tmp_path, capsys, monkeypatch
):
    pytest.importorskip("langchain.agents")
    module = _load("langchain_agent", monkeypatch)
    argv = ["--base-url", served.base_url, "--profile", _profile(reference_profile, tmp_path)]
    status = module.main(argv)
    out = capsys.readouterr().out
    assert out.count(": OK)") == 2 and "WRONG" not in out, out  # the question and the follow-up
    assert "aligned tool result resent byte for byte: True" in out
    assert "key positions" in out
    assert status == 0


def test_streaming_example_answers_and_checks_the_streamed_usage(
    served, reference_profile, tmp_path, capsys, monkeypatch
):
    module = _load("langchain_stream", monkeypatch)
    argv = ["--base-url", served.base_url, "--profile", _profile(reference_profile, tmp_path)]
    assert module.main(argv) == 0
    out = capsys.readouterr().out
    assert ": OK)" in out and "WRONG" not in out
    planned, counted = out.split("usage check: planned ")[1].split(" tokens, server counted ")
    assert int(planned) == int(counted.split()[0])
