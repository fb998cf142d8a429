"""``phaseaware compare`` through the callable backend: a simulated model weak at one
residue (it tokenizes the prompt it is given), real tokenizer, real assembly."""

from __future__ import annotations

import json

import pytest

from phaseaware.cli.main import main
from phaseaware.compare.grade import load_grader, normalize_answer
from phaseaware.compare.questions import read_questions
from phaseaware.profiles.io import save_profile
from tests.support import compare_responder
from tests.support.sim_profile import simulated_profile

scipy_stats = pytest.importorskip("scipy.stats")


@pytest.fixture()
def setup(tmp_path):
    profile = simulated_profile(
        (1.0, 1.0, 1.0, 0.1),
        model="tests.support.compare_responder:answer",  # what calibrate names a callable
    )
    profile_path = tmp_path / "sim.json"
    save_profile(profile, profile_path)
    return compare_responder.write_questions(tmp_path / "q.jsonl"), profile_path


def _argv(questions, profile, tmp_path, *extra):
    return [
        "compare", str(questions), "--profile", str(profile), "--budget-tokens", "400",
        "--backend", "callable", "--model", "tests.support.compare_responder:answer",
        "--tokenizer", "tiktoken:cl100k_base", "--chat-format", "chatml",
        "--log", str(tmp_path / "log.jsonl"), *extra,
    ]  # fmt: skip


def test_phase_aware_wins_where_the_model_is_weak_and_resumes(setup, tmp_path, capsys):
    questions, profile = setup
    assert main([*_argv(questions, profile, tmp_path), "--json"]) == 0
    doc = json.loads(capsys.readouterr().out)
    rows = {r["arrangement"]: r for r in doc["rows"]}
    assert rows["phase-aware"]["correct"] == 48
    naive = rows["naive"]
    assert naive["correct"] == 48 - naive["evidence_residues"][compare_responder.WEAK]
    assert rows["phase-aware"]["evidence_residues"][compare_responder.WEAK] == 0
    paired = {t["other"]: t for t in doc["paired"]}
    wins, losses = paired["naive"]["wins"], paired["naive"]["losses"]
    assert losses == 0 and wins == 48 - naive["correct"] > 0
    assert paired["naive"]["p_value"] == pytest.approx(
        scipy_stats.binomtest(wins, wins + losses, 0.5).pvalue
    )
    assert doc["n_requests"] == 5 * 48
    assert naive["evidence_correct"][compare_responder.WEAK] == 0  # every miss is there
    assert doc["verdict"]["placement_helped"] and doc["verdict"]["carried_by"] == "placement"
    assert naive["ci_low"] <= naive["accuracy"] <= naive["ci_high"]
    # resume: nothing asked again; another grader re-grades the same answers
    assert main([*_argv(questions, profile, tmp_path), "--grader", "contains"]) == 0
    text = capsys.readouterr().out
    assert "requests: 0 made by this run, 240 answers reused" in text
    assert "phase-aware vs naive" in text and "verdict:" in text


def test_another_comparison_refuses_the_log_and_a_torn_line_is_cut(setup, tmp_path, capsys):
    questions, profile = setup
    assert main(_argv(questions, profile, tmp_path)) == 0
    capsys.readouterr()
    log = tmp_path / "log.jsonl"
    lines = log.read_bytes().splitlines(keepends=True)
    log.write_bytes(b"".join(lines[:-2]) + lines[-2][:20])  # a killed run: torn last line
    assert main([*_argv(questions, profile, tmp_path), "--json"]) == 0
    doc = json.loads(capsys.readouterr().out)
    assert doc["n_requests"] == 2 and doc["n_skipped"] == 5 * 48 - 2
    argv = _argv(questions, profile, tmp_path)
    argv[argv.index("--budget-tokens") + 1] = "390"
    assert main(argv) == 1
    assert "belongs to a different comparison" in capsys.readouterr().err
    assert main([*argv, "--fresh", "--json"]) == 0


@pytest.mark.parametrize(
    ("line", "message"),
    [
        ('{"question": "q", "chunks": [], "answer": "a"}', "'chunks' must be a non-empty list"),
        ('{"question": "q", "chunks": [{"text": "t", "id": "a"}]}', "'answer' must be"),
        ('{"question": "", "chunks": [{"text": "t", "id": "a"}], "answer": "a"}', "'question'"),
        ('{"question": "q", "chunks": [{"text": "t"}], "answer": "a"}', "unique 'id'"),
        ('{"question": "q", "chunks": [{"text": "t", "id": "a"}], "answer": "a", "x": 1}',
         "unknown field(s) x"),
        ("[1, 2]", "expected a JSON object"),
        ("{not json", "not valid JSON"),
    ],
)  # fmt: skip
def test_bad_question_lines_name_the_line_and_the_fix(tmp_path, capsys, line, message):
    path = tmp_path / "bad.jsonl"
    path.write_text('{"question": "q", "chunks": [{"text": "t", "id": "a"}], "answer": "a"}\n'
                    + line + "\n", encoding="utf-8")  # fmt: skip
    argv = ["compare", str(path), "--profile", "x.json", "--budget-tokens", "100"]
    argv += ["--backend", "callable", "--model", "m:f"]
    assert main(argv) == 1
    err = capsys.readouterr().err
    assert "line 2" in err and message in err and "Traceback" not in err


def test_questions_are_read_in_retrieval_order(setup):
    questions, _ = setup
    for q in read_questions(questions):
        assert [c.score for c in q.chunks] == sorted((c.score for c in q.chunks), reverse=True)
        assert q.top_evidence_id == "c0"


def test_graders():
    exact, contains, regex = (load_grader(name) for name in ("exact", "contains", "regex"))
    assert normalize_answer("  The Eiffel-Tower! ") == "eiffeltower"
    assert exact("The answer.", ["answer"]) and not exact("an answer is 4", ["4"])
    # the first non-empty line is the answer; the model going on after it is not graded
    assert exact("\n 150 \nQuestion: what is the access code for Milo ?", ["150"])
    assert not exact("150 143 150 150", ["150"]) and not exact("", ["150"])
    assert contains("It is 4 o'clock", ["4"]) and not contains("It is 42", ["4"])
    assert regex("code: 0451", [r"\b0?451\b"]) and not regex("code 452", [r"^451$"])
    lenient = load_grader("tests.support.compare_responder:lenient")
    assert lenient("ABC", ["b"])
    from phaseaware.errors import InputError

    with pytest.raises(InputError, match="not True/False"):
        load_grader("tests.support.compare_responder:not_a_bool")("x", ["x"])
    with pytest.raises(InputError, match="unknown grader"):
        load_grader("fuzzy")
    with pytest.raises(InputError, match="cannot import"):
        load_grader("no_such_module_xyz:f")


def test_plot_needs_matplotlib_and_says_so_before_any_request(setup, tmp_path, capsys, monkeypatch):
    import importlib.util

    real = importlib.util.find_spec  # matplotlib hidden, whether or not it is installed

    def find_spec(name, *args, **kwargs):
        return None if name.split(".")[0] == "matplotlib" else real(name, *args, **kwargs)

    monkeypatch.setattr(importlib.util, "find_spec", find_spec)
    questions, profile = setup
    assert main([*_argv(questions, profile, tmp_path), "--plot", str(tmp_path / "c.png")]) == 1
    assert "pip install -e '.[plot]'" in capsys.readouterr().err
    assert not (tmp_path / "log.jsonl").exists()


def test_shipped_reference_questions_are_the_generated_ones():
    from phaseaware.demo.questions_file import QUESTIONS_FILE, generated_lines, reference_questions

    assert QUESTIONS_FILE.read_text(encoding="utf-8") == generated_lines()
    questions = reference_questions()
    assert len(questions) == 400 and questions[0].id == "q0"
    assert all(q.top_evidence_id == f"{q.id}-c0" for q in questions)
