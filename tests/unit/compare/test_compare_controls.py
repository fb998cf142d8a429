"""The controls' parts: the placebo profile, order-only's order, --arrangements, the
warnings about a profile measured elsewhere, and a log written before the controls."""

from __future__ import annotations

import copy
import json

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

from phaseaware.cli.main import main
from phaseaware.compare.arrange import ARRANGEMENTS, Arranger, parse_arrangements
from phaseaware.compare.mismatch import profile_chat_format, profile_mismatches
from phaseaware.compare.placebo import placebo_profile, placebo_shift
from phaseaware.compare.questions import read_questions
from phaseaware.errors import InputError
from phaseaware.profiles.io import save_profile
from phaseaware.profiles.model import TokenizerRef
from phaseaware.tokenizers import load_tokenizer
from tests.support import compare_responder
from tests.support.sim_profile import simulated_profile

TOKENIZER = "tiktoken:cl100k_base"


def _profile(accuracy, *, model="m", protocol="sweep, chat format 'chatml'", fingerprint=True):
    return simulated_profile(
        accuracy, model=model, protocol=protocol, n=range(10, 10 + len(accuracy)),
        fingerprint=fingerprint, reliability=tuple(a * 0.9 for a in accuracy),
        extra={"x-note": "kept"},
    )  # fmt: skip


def test_the_placebo_turns_an_even_profile_by_half_its_period():
    profile = _profile([0.95, 1.0, 1.0, 1.0, 0.98, 0.92, 0.5, 0.5])
    before = copy.deepcopy(profile)
    placebo = placebo_profile(profile)
    assert profile == before and profile.extra == {"x-note": "kept"}  # the caller's, untouched
    assert placebo.residue_accuracy == (0.98, 0.92, 0.5, 0.5, 0.95, 1.0, 1.0, 1.0)
    assert placebo.n == (14, 15, 16, 17, 10, 11, 12, 13)
    assert placebo.reliability == tuple(a * 0.9 for a in placebo.residue_accuracy)
    assert placebo.ci_low[2] == profile.ci_low[6] and placebo.ci_high[2] == profile.ci_high[6]
    assert placebo.extra == {"x-note": "kept", "x-placebo-shift": 4}
    assert (placebo.tokenizer, placebo.length_residue_accuracy) == (
        profile.tokenizer, profile.length_residue_accuracy)  # fmt: skip
    # it aims where the profile is worst: the residues it calls best are the profile's worst
    best = [r for r in range(8) if placebo.residue_accuracy[r] == 1.0]
    assert [profile.residue_accuracy[r] for r in best] == [0.92, 0.5, 0.5]


@given(st.lists(st.floats(0, 1), min_size=3, max_size=15).filter(lambda v: len(v) % 2 == 1))
def test_an_odd_period_takes_the_rotation_that_anti_correlates_most(values):
    shift = placebo_shift(values)
    period = len(values)
    centred = np.asarray(values) - np.mean(values)

    def score(s):
        return float(np.dot(centred, np.roll(centred, -s)))

    assert 1 <= shift <= period // 2
    assert all(score(shift) <= score(s) + 1e-9 for s in range(1, period))


def test_shift_edge_cases():
    assert placebo_shift([0.7]) == 0  # one residue: nothing to turn
    assert placebo_shift([0.5, 0.5, 0.5]) == 1  # flat and odd: period // 2
    assert placebo_shift([1.0, 0.0, 1.0, 1.0, 0.0]) in (1, 2)
    assert placebo_shift([1.0, 0.5]) == 1


def _order(result):
    return [p.chunk_id for p in sorted(result.placements, key=lambda p: p.order)]


def test_order_only_keeps_phase_aware_s_order_without_padding(tmp_path):
    questions = read_questions(compare_responder.write_questions(tmp_path / "q.jsonl", count=12))
    arranger = Arranger(tokenizer=load_tokenizer(TOKENIZER), chat_format="chatml",
                        profile=_profile([1.0, 1.0, 1.0, 0.1]), budget_tokens=400)  # fmt: skip
    for q in questions:
        results = arranger.assemble_question(ARRANGEMENTS, chunks=q.chunks, question=q.question,
                                             system=None)  # fmt: skip
        assert list(results) == list(ARRANGEMENTS)

        assert _order(results["order-only"]) == _order(results["phase-aware"])
        assert results["order-only"].padding_tokens == 0 == results["naive"].padding_tokens
        assert results["order-only"].repeated_tokens == 0
        # the placebo is phase-aware's assembly with the turned profile; every prediction
        # is read with the real one
        top = q.top_evidence_id
        predicted = arranger.predicted_accuracy(results["placebo"], top)
        placement = next(p for p in results["placebo"].placements if p.chunk_id == top)
        assert predicted == pytest.approx(
            np.mean(
                [arranger.profile.residue_reliability(t) for t in placement.key_token_positions]
            )
        )


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("naive,phase-awre", "unknown arrangement(s) 'phase-awre'"),
        ("naive,,placebo", "give comma-separated names"),
        ("", "give comma-separated names"),
        ("naive,naive", "names naive more than once"),
    ],
)
def test_arrangements_are_checked(text, message):
    with pytest.raises(InputError, match=message.replace("(", r"\(").replace(")", r"\)")):
        parse_arrangements(text)


def test_arrangements_come_in_report_order():
    assert parse_arrangements(" placebo, naive ,phase-aware") == ("naive", "phase-aware", "placebo")


def test_an_unknown_arrangement_fails_before_any_request(tmp_path, capsys):
    questions = compare_responder.write_questions(tmp_path / "q.jsonl", count=2)
    profile = tmp_path / "p.json"
    save_profile(_profile([1.0, 1.0, 1.0, 0.1]), profile)
    argv = ["compare", str(questions), "--profile", str(profile), "--budget-tokens", "400",
            "--backend", "callable", "--model", "tests.support.compare_responder:answer",
            "--tokenizer", TOKENIZER, "--chat-format", "chatml", "--log",
            str(tmp_path / "log.jsonl"), "--arrangements", "naive,shuffled"]  # fmt: skip
    assert main(argv) == 1
    err = capsys.readouterr().err
    assert "unknown arrangement(s) 'shuffled'" in err and "order-only, placebo" in err
    assert not (tmp_path / "log.jsonl").exists()


def test_a_profile_measured_elsewhere_is_named_before_the_run_and_in_the_report(tmp_path, capsys):
    tok = load_tokenizer(TOKENIZER)
    same = _profile([1.0, 0.5], model="org/My_Model")
    assert profile_mismatches(same, model="my-model", tokenizer=tok, chat_format="chatml") == ()
    assert profile_chat_format(_profile([1.0, 0.5], protocol="x, template 'hf', y")) == "hf"
    assert profile_chat_format(_profile([1.0, 0.5], protocol="NIAH, 128K prompts")) is None
    published = _profile([1.0, 0.5], fingerprint=False)
    published = published.__class__(**{**published.__dict__,
                                        "tokenizer": TokenizerRef(spec="deepseek-v4", fingerprint=None)})  # fmt: skip
    found = profile_mismatches(published, model="other", tokenizer=tok, chat_format="hf")
    assert len(found) == 3
    assert "measured for model 'm', this run asks 'other'" in found[0]
    assert "names tokenizer 'deepseek-v4', this run counts with 'tiktoken:cl100k_base'" in found[1]
    assert "measured under chat format 'chatml', this run renders 'hf'" in found[2]
    # the command says it before the first request, and the report carries it
    questions = compare_responder.write_questions(tmp_path / "q.jsonl", count=4)
    profile = tmp_path / "p.json"
    save_profile(_profile([1.0, 1.0, 1.0, 0.1], model="another-model"), profile)
    argv = ["compare", str(questions), "--profile", str(profile), "--budget-tokens", "400",
            "--backend", "callable", "--model", "tests.support.compare_responder:answer",
            "--tokenizer", TOKENIZER, "--chat-format", "chatml", "--log",
            str(tmp_path / "log.jsonl"), "--json"]  # fmt: skip
    assert main(argv) == 0
    out = capsys.readouterr()
    assert "phaseaware: warning: the profile was measured for model 'another-model'" in out.err
    assert out.err.index("warning") < out.err.index("answers done")
    doc = json.loads(out.out)
    assert len(doc["warnings"]) == 1 and "another-model" in doc["warnings"][0]


def test_a_log_written_before_the_controls_resumes(tmp_path, capsys):
    """A v1 log's header fingerprinted the three arrangements it ran; the same comparison
    now resumes it and asks the controls only."""
    questions = compare_responder.write_questions(tmp_path / "q.jsonl", count=6)
    profile = tmp_path / "p.json"
    save_profile(_profile([1.0, 1.0, 1.0, 0.1], model="tests.support.compare_responder:answer"),
                 profile)  # fmt: skip
    log = tmp_path / "log.jsonl"
    argv = ["compare", str(questions), "--profile", str(profile), "--budget-tokens", "400",
            "--backend", "callable", "--model", "tests.support.compare_responder:answer",
            "--tokenizer", TOKENIZER, "--chat-format", "chatml", "--log", str(log), "--json"]  # fmt: skip
    assert main([*argv, "--arrangements", "naive,lost-in-the-middle,phase-aware"]) == 0
    capsys.readouterr()
    # rewrite the header as the earlier version wrote it: arrangements in the identity
    from phaseaware.compare.log import fingerprint

    lines = log.read_text(encoding="utf-8").splitlines(keepends=True)
    header = json.loads(lines[0])
    header["settings"]["arrangements"] = ["naive", "lost-in-the-middle", "phase-aware"]
    header["fingerprint"] = fingerprint(header["settings"])
    log.write_text(json.dumps(header, sort_keys=True) + "\n" + "".join(lines[1:]), encoding="utf-8")
    assert main(argv) == 0
    doc = json.loads(capsys.readouterr().out)
    assert doc["n_skipped"] == 3 * 6 and doc["n_requests"] == 2 * 6
    assert [r["arrangement"] for r in doc["rows"]] == list(ARRANGEMENTS)
    # another comparison is still refused
    header["settings"]["budget_tokens"] = 390
    header["fingerprint"] = fingerprint(header["settings"])
    log.write_text(json.dumps(header, sort_keys=True) + "\n", encoding="utf-8")
    assert main(argv) == 1
    assert "belongs to a different comparison" in capsys.readouterr().err


def test_a_demo_answer_log_named_before_the_controls_is_found(tmp_path):
    from phaseaware.compare.log import fingerprint
    from phaseaware.demo.run import answer_log

    identity = {"questions": "sha256:0", "budget_tokens": 512, "model": "m"}
    fresh = answer_log(tmp_path, identity)
    assert fresh.name == f"phaseaware-reference.compare-{fingerprint(identity)[7:19]}.jsonl"
    before = {**identity, "arrangements": ["naive", "lost-in-the-middle", "phase-aware"]}
    earlier = tmp_path / f"phaseaware-reference.compare-{fingerprint(before)[7:19]}.jsonl"
    earlier.write_text("{}\n", encoding="utf-8")
    assert answer_log(tmp_path, identity) == earlier  # resumed, controls asked
    fresh.write_text("{}\n", encoding="utf-8")
    assert answer_log(tmp_path, identity) == fresh  # a log under today's name wins
