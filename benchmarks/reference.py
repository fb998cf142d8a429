"""Reference model benchmark: calibration and held-out RAG accuracy, with the targets.

    python benchmarks/reference.py [--questions 400] [--base-prompts 60] [--seed 0]

Runs the demo (:func:`phaseaware.demo.run.run_demo`: calibrate the shipped
reference model, then answer held-out RAG questions three ways) and prints:

- accuracy by key residue with 95% Wilson intervals, Cochran's Q, the gap;
- RAG accuracy per strategy with 95% intervals, tokens per prompt, padding;
- the issue's targets: Cochran's Q p < 0.01 and gap >= 15 points; phase-aware
  within 3 points of the best residue's accuracy; naive near the mean; padding
  <= 3% of context tokens.
"""

from __future__ import annotations

import argparse
import sys
import tempfile
from pathlib import Path


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--questions", type=int, default=400)
    parser.add_argument("--base-prompts", type=int, default=60)
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args()

    from phaseaware.demo.run import DemoSettings, run_demo

    with tempfile.TemporaryDirectory() as out:
        settings = DemoSettings(
            questions=args.questions,
            base_prompts=args.base_prompts,
            seed=args.seed,
            out=Path(out),
            fresh=True,
        )
        result = run_demo(settings, on_stage=lambda message: print(message, file=sys.stderr))
    doc = result.summary()
    cal, rag = doc["calibration"], doc["rag"]

    print(f"Calibration of the reference model ({cal['n'][0]} base prompts per residue)")
    print(f"{'residue':>7} {'accuracy':>9} {'95% CI':>16}")
    for r, acc in enumerate(cal["residue_accuracy"]):
        low, high = cal["ci_low"][r], cal["ci_high"][r]
        print(f"{r:>7} {100 * acc:>8.1f}% {100 * low:>7.1f}–{100 * high:.1f}%")
    best = max(cal["residue_accuracy"])
    mean = sum(cal["residue_accuracy"]) / len(cal["residue_accuracy"])
    print(f"Cochran's Q p = {cal['cochran_p']:.2g}; gap = {100 * cal['gap']:.1f} points")
    print(f"best residue {100 * best:.1f}%; mean over residues {100 * mean:.1f}%")
    window = cal.get("local_window_accuracy")
    if window:
        print(
            f"raw local window: {100 * window['accuracy']:.1f}% "
            f"[{100 * window['ci_low']:.1f}–{100 * window['ci_high']:.1f}%], n = {window['n']}, "
            f"key {window['min_distance']}-{window['max_distance']} tokens from the end"
        )
    print(f"verdict: {cal['verdict']}\n")

    print(f"Held-out RAG questions ({args.questions}), exact match")
    print(f"{'strategy':<20} {'accuracy':>9} {'95% CI':>14} {'tokens':>7} {'padding':>8}")
    for row in rag:
        ci = f"{100 * row['ci_low']:.1f}–{100 * row['ci_high']:.1f}%"
        print(
            f"{row['strategy']:<20} {100 * row['accuracy']:>8.1f}% {ci:>14} "
            f"{row['mean_prompt_tokens']:>7.1f} {100 * row['padding_overhead']:>7.2f}%"
        )
    by_name = {row["strategy"]: row for row in rag}
    phase, naive = by_name["phase-aware"], by_name["naive"]
    print(
        f"\nphase-aware vs best residue: {100 * (phase['accuracy'] - best):+.1f} points; "
        f"naive vs residue mean: {100 * (naive['accuracy'] - mean):+.1f} points"
    )
    print("\nTargets")
    checks = [
        ("Cochran's Q p < 0.01", cal["cochran_p"] < 0.01),
        ("gap >= 15 points", cal["gap"] >= 0.15),
        ("phase-aware within 3 points of best residue", phase["accuracy"] >= best - 0.03),
        ("naive within 5 points of the residue mean", abs(naive["accuracy"] - mean) <= 0.05),
        ("padding <= 3% of context tokens", phase["padding_overhead"] <= 0.03),
    ]
    for label, ok in checks:
        print(f"  [{'x' if ok else ' '}] {label}")


if __name__ == "__main__":
    main()
