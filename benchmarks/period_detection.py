"""Period detection: how often ``--period auto`` finds a planted period as itself, and how
often it reports one on flat accuracy, for ``calibrate`` and for ``score``.

    python benchmarks/period_detection.py [--runs 20]

Seeded simulations at the default run size (``tests/support/simulated_runs.py``): 480 key
positions, as ``calibrate`` places them (30 base prompts x 16 offsets, each base prompt's key at
a multiple of 16) or as an eval log holds them (anywhere in 100..4000 tokens). A period ``p``
carries a 10-point effect (half its residues at 100%, half at 90%); every candidate 2..16 is
tested on ``key_position mod p`` itself, through the commands' own code
(``calibration.analysis.analyze_log`` on a written log, ``scoring.tally.tally``). The unit
tests (``tests/unit/calibration/test_period_any.py``) require >= 18 of 20 and, flat, >= 19 of 20
with no period.
"""

from __future__ import annotations

import argparse
import sys
import tempfile
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=20)
    args = parser.parse_args()

    from phaseaware.calibration.analysis import analyze_log
    from phaseaware.scoring.locate import Located
    from phaseaware.scoring.tally import tally
    from tests.support import simulated_runs as sr

    def scored(rng: np.random.Generator, accuracy: np.ndarray) -> int | None:
        positions = sr.eval_positions(rng)
        right = sr.outcomes(rng, positions, accuracy)
        located = [
            Located(f"s{i}", int(p), int(p) + 40, bool(r))
            for i, (p, r) in enumerate(zip(positions, right, strict=True))
        ]
        detection = tally(located, period=None, max_period=16).detection
        return None if detection is None else detection.period

    def calibrated(rng: np.random.Generator, accuracy: np.ndarray, folder: Path) -> int | None:
        detection = analyze_log(sr.write_calibration_log(folder / "sim.jsonl", rng, accuracy))
        return None if detection.detection is None else detection.detection.period

    scenarios: list[tuple[str, np.ndarray, int | None]] = [
        (f"period {p}, 10 points", sr.effect(p), p) for p in (2, 3, 4, 5, 6, 8, 12)
    ]
    scenarios += [("flat 95%", np.array([0.95]), None), ("flat 70%", np.array([0.7]), None)]
    print(f"{'scenario':<22} {'command':<9} {'as itself':>10}  reported")
    with tempfile.TemporaryDirectory() as tmp:
        for name, accuracy, truth in scenarios:
            for command in ("calibrate", "score"):
                rng = np.random.default_rng([len(name), ord(name[-1]), len(command)])
                found = [
                    calibrated(rng, accuracy, Path(tmp))
                    if command == "calibrate"
                    else scored(rng, accuracy)
                    for _ in range(args.runs)
                ]
                right = sum(p == truth for p in found)
                counts = {
                    p: found.count(p) for p in sorted(set(found), key=lambda p: (p is None, p))
                }
                shown = ", ".join(f"{'none' if p is None else p}: {c}" for p, c in counts.items())
                print(f"{name:<22} {command:<9} {right:>4} of {args.runs:<3}  {shown}")


if __name__ == "__main__":
    main()
