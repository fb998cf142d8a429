"""Seeded simulated runs for the period tests: key positions as ``calibrate`` places them or as
an eval log holds them, outcomes drawn from an accuracy pattern by ``position mod period``.

A *10-point effect* of period ``p``: the first ``p - p // 2`` residues at ``high``, the other
``p // 2`` at ``high - 0.10`` (a square wave: no fold by a proper divisor of ``p`` explains it
fully). The *default run size* is ``calibrate``'s: 30 base prompts x 16 key offsets = 480 probes.
"""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np

from phaseaware.calibration.log import LogHeader, ProbeRecord

BASE_PROMPTS = 30
OFFSETS = 16


def effect(period: int, *, high: float = 1.0, points: float = 10.0) -> np.ndarray:
    """Accuracy by residue of a ``points``-point effect repeating every ``period`` tokens."""
    weak = period // 2
    return np.array([high] * (period - weak) + [high - points / 100] * weak)


def calibrate_positions(
    rng: np.random.Generator, *, base_prompts: int = BASE_PROMPTS, spread: bool = True
) -> np.ndarray:
    """Key positions of a ``--period auto`` key sweep, rows = base prompts: base prompt ``b``'s
    offset-0 key at residue ``b mod 16`` (``spread``, ``ProbeSettings.spread_keys``; else at a
    multiple of 16) at a varying depth, then offsets 0..15 (``calibration.haystack.fit_base``
    and ``variants``)."""
    starts = OFFSETS * rng.integers(8, 64, size=base_prompts)
    if spread:
        starts = starts + np.arange(base_prompts) % OFFSETS
    return starts[:, None] + np.arange(OFFSETS)[None, :]


def eval_positions(rng: np.random.Generator, n: int = BASE_PROMPTS * OFFSETS) -> np.ndarray:
    """Key positions of an eval log: needles anywhere in 100..4000-token prompts."""
    return rng.integers(100, 4000, size=n)


def outcomes(rng: np.random.Generator, positions: np.ndarray, accuracy: np.ndarray) -> np.ndarray:
    """0/1 outcomes, accuracy ``accuracy[position mod len(accuracy)]``."""
    return (rng.random(positions.size) < accuracy[positions % accuracy.size]).astype(float)


def write_calibration_log(
    path: Path, rng: np.random.Generator, accuracy: np.ndarray, *, period: int | str = "auto"
) -> Path:
    """A complete key sweep log of the default run size, as ``calibrate`` writes it."""
    settings = {
        "context_tokens": 1024, "n_offsets": OFFSETS, "base_prompts": BASE_PROMPTS,
        "sweeps": ["key"], "seed": 0, "distractors": 3, "max_tokens": 8,
        "depth": [0.15, 0.6], "system": None, "period": period, "chat_format": "chatml",
    }  # fmt: skip
    header = LogHeader(
        fingerprint="sim-" + json.dumps(settings, sort_keys=True)[:16],
        settings=settings,
        tokenizer_spec="sim",
        tokenizer_fingerprint="sim",
        model="sim-model",
        backend="callable",
        created="2026-01-01T00:00:00Z",
        tool_version="0",
    )
    positions = calibrate_positions(rng)
    lines = [json.dumps(header.to_dict(), sort_keys=True)]
    for b in range(BASE_PROMPTS):
        right = outcomes(rng, positions[b], accuracy)
        for k in range(OFFSETS):
            record = ProbeRecord(
                probe_id=f"key:{b}:{k}", sweep="key", base_index=b, offset=k,
                key_position=int(positions[b, k]), prompt_tokens=1024,
                correct=bool(right[k]), expected="1", completion="1",
                answer_logprob=None, elapsed=0.0,
            )  # fmt: skip
            lines.append(record.to_line().rstrip("\n"))
    # the lines ``CalibrationLog.append`` writes, without an fsync per probe
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    return path


def shuffle_outcomes(path: Path, rng: np.random.Generator) -> Path:
    """The same log with its key-sweep outcomes permuted across probes: any phase effect is
    gone, the overall accuracy stays."""
    lines = path.read_text(encoding="utf-8").splitlines()
    records = [json.loads(line) for line in lines[1:]]
    correct = rng.permutation([r["correct"] for r in records])
    for record, value in zip(records, correct, strict=True):
        record["correct"] = bool(value)
    out = path.with_name(path.stem + "-shuffled.jsonl")
    out.write_text(
        "\n".join([lines[0], *(json.dumps(r, sort_keys=True) for r in records)]) + "\n",
        encoding="utf-8",
    )
    return out
