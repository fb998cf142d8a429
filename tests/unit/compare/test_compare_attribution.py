"""``compare`` tells order from phase placement: simulated models served over real HTTP.

Each model sits behind :func:`tests.support.endpoint_server.start_endpoint` on
loopback (it renders chatml and tokenizes with cl100k as a serving stack would) and
is asked by ``phaseaware compare --backend openai`` through the official openai
client. One model's gain comes only from the top chunk being last (no residue
effect); the other's only from where the key token lands (a weak residue). The
report must credit the order in the first case and phase placement in the second,
and a profile that points at the wrong residues must show up against the placebo.
"""

from __future__ import annotations

import json

import pytest

from phaseaware.cli.main import main
from phaseaware.profiles.io import save_profile
from phaseaware.tokenizers import load_tokenizer
from tests.support import compare_responder
from tests.support.endpoint_server import start_endpoint
from tests.support.sim_profile import simulated_profile

pytest.importorskip("scipy.stats")
pytest.importorskip("openai")

TOKENIZER = "tiktoken:cl100k_base"


def _profile(path, accuracy):
    profile = simulated_profile(
        accuracy, model="sim-model", protocol="simulated key sweep, chat format 'chatml'"
    )
    save_profile(profile, path)
    return path


def _compare(tmp_path, capsys, answer, accuracy, *extra, count=64):
    questions = compare_responder.write_questions(tmp_path / "q.jsonl", count=count, seed=3)
    profile = _profile(tmp_path / "sim.json", accuracy)
    server, _ = start_endpoint(
        tokenizer=load_tokenizer(TOKENIZER), chat_format="chatml", answer=answer
    )
    with server:
        argv = ["compare", str(questions), "--profile", str(profile), "--budget-tokens", "400",
                "--backend", "openai", "--base-url", server.base_url, "--model", "sim-model",
                "--tokenizer", TOKENIZER, "--chat-format", "chatml", "--concurrency", "8",
                "--log", str(tmp_path / "log.jsonl"), *extra]  # fmt: skip
        assert main([*argv, "--json"]) == 0, capsys.readouterr().err
        doc = json.loads(capsys.readouterr().out)
        assert main(argv) == 0  # the same answers again, as text
        text = capsys.readouterr().out
    return doc, text


WEAK_AT_3 = (1.0, 1.0, 1.0, 0.1)


def test_a_gain_from_the_order_alone_is_credited_to_the_order(tmp_path, capsys):
    doc, text = _compare(tmp_path, capsys, compare_responder.top_last_model, WEAK_AT_3)
    verdict = doc["verdict"]
    assert verdict["gain"]["effect"] == "better"  # phase-aware beat naive ...
    assert verdict["order"]["effect"] == "better"  # ... because it puts the top chunk last
    assert verdict["placement"]["effect"] == "none"  # the residues did nothing
    assert verdict["carried_by"] == "order" and not verdict["placement_helped"]
    assert "the order carried the result, not phase placement" in text
    assert "phase placement helped" not in text
    assert "no significant placement effect" in text


def test_a_pure_residue_effect_is_credited_to_placement(tmp_path, capsys):
    doc, text = _compare(tmp_path, capsys, compare_responder.residue_model, WEAK_AT_3)
    verdict = doc["verdict"]
    assert verdict["gain"]["effect"] == "better"
    assert verdict["placement"]["effect"] == "better" and verdict["placement_helped"]
    assert verdict["order"]["effect"] == "none"
    assert verdict["carried_by"] == "placement"
    assert "phase placement carried the result, not the order" in text
    rows = {r["arrangement"]: r for r in doc["rows"]}
    assert rows["phase-aware"]["evidence_residues"][compare_responder.WEAK] == 0
    assert rows["placebo"]["evidence_residues"][compare_responder.WEAK] > 0
    # the profile's prediction sits beside each observed accuracy; the placebo's is low
    assert rows["placebo"]["expected_accuracy"] < rows["phase-aware"]["expected_accuracy"]
    assert "phase-aware vs naive: " in text and "(the profile predicted +" in text


def test_a_profile_pointing_at_the_wrong_residues_loses_to_the_placebo(tmp_path, capsys):
    """The issue's inverted profile: it calls residue 1 weak, the model is weak at 3. The
    placebo (turned half a period) aims away from 3 and wins; the report says so."""
    inverted = (1.0, 0.1, 1.0, 1.0)
    doc, text = _compare(tmp_path, capsys, compare_responder.residue_model, inverted)
    verdict = doc["verdict"]
    assert verdict["placement"]["effect"] == "worse" and not verdict["placement_helped"]
    assert "the placebo did better: the profile's good residues are not this model's" in text
    assert "phase placement helped" not in text


def test_arrangements_selects_a_subset_and_the_log_takes_the_rest_later(tmp_path, capsys):
    doc, text = _compare(
        tmp_path, capsys, compare_responder.residue_model, WEAK_AT_3,
        "--arrangements", "phase-aware,naive", count=24,
    )  # fmt: skip
    assert [r["arrangement"] for r in doc["rows"]] == ["naive", "phase-aware"]
    assert doc["n_requests"] == 2 * 24 and doc["order"] is None
    assert doc["verdict"]["carried_by"] == "not measured"
    assert "attribution: not measured: run the controls order-only and placebo" in text
    # the full run resumes the same log: only the three missing arrangements are asked
    doc, _ = _compare(tmp_path, capsys, compare_responder.residue_model, WEAK_AT_3, count=24)
    assert doc["n_skipped"] == 2 * 24 and doc["n_requests"] == 3 * 24
