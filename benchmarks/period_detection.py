"""Period detection: how often ``detect_period`` finds a planted period, and how often it
reports one on flat accuracy; and whether a run sized by the planner finds its gap.

    python benchmarks/period_detection.py [--runs 200]

Simulated responders (independent outcomes, seeded): each scenario is a per-offset
accuracy pattern measured by ``base prompts`` probes per offset.
"""

from __future__ import annotations

import argparse

import numpy as np


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=200)
    args = parser.parse_args()

    from phaseaware.calibration.stats import detect_period, plan_calibration

    scenarios = [
        ("period 2, 100% / 90%", np.tile([1.0, 0.9], 16), 16, 40, 2),
        ("period 2, 80% / 74% (6 points)", np.tile([0.8, 0.74], 16), 16, 40, 2),
        ("period 4, one residue 50%", np.tile([0.9, 0.85, 0.9, 0.5], 4), 8, 40, 4),
        ("period 4, one residue 75%", np.tile([0.9, 0.9, 0.9, 0.75], 8), 16, 40, 4),
        ("period 8, two residues 60%", np.tile([0.9] * 6 + [0.6, 0.6], 4), 16, 40, 8),
        ("period 8, one residue 60%", np.tile([0.9] * 7 + [0.6], 2), 8, 40, 8),
        ("flat 90%", np.full(32, 0.9), 16, 40, None),
        ("flat 80%", np.full(16, 0.8), 8, 40, None),
    ]
    plan = plan_calibration(
        period=32, detect_gap=0.06, gap_period=2, max_period=16, tokens_per_probe=1
    )
    scenarios.append(
        (
            f"period 2, 6 points, planned size ({plan.n_base_prompts}/offset)",
            np.tile([0.8, 0.74], 16),
            16,
            plan.n_base_prompts,
            2,
        )
    )
    rng = np.random.default_rng(0)
    print(f"{'scenario':<46} {'offsets':>7} {'max':>4} {'n':>4}  {'right':>6}  reported")
    for name, pattern, max_period, n, truth in scenarios:
        found = []
        for _ in range(args.runs):
            outcomes = (rng.random((n, pattern.size)) < pattern).astype(float)
            found.append(detect_period(outcomes, max_period=max_period).period)
        right = sum(p == truth for p in found) / args.runs
        counts = {p: found.count(p) for p in sorted(set(found), key=lambda p: (p is None, p))}
        shown = ", ".join(f"{'none' if p is None else p}: {c}" for p, c in counts.items())
        print(f"{name:<46} {pattern.size:>7} {max_period:>4} {n:>4}  {100 * right:>5.1f}%  {shown}")
    print(f"\nplanner: {plan.rationale}")


if __name__ == "__main__":
    main()
