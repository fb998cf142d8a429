"""Held-out retrieval accuracy of a reference-model checkpoint, by residue of the key token.

The probes are the trainer's held-out set (``phaseaware.reference.train.heldout``:
seeded, target key at least 24 tokens before the answer, so only compressed
memory can hold it). Prints accuracy per residue (absolute position mod 8) with
95% Wilson intervals and a two-proportion z of the weakest residue
against the rest, and can write the result as the ``final`` entry of a
``training_metrics.json`` (atomically), which is what the shipped weights'
metrics file holds.

Usage::

    python benchmarks/reference_heldout.py --model RUN_DIR --probes 1024
    python benchmarks/reference_heldout.py --model phaseaware/reference/data
"""

from __future__ import annotations

import argparse
import json
import math
from pathlib import Path


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--model", type=Path, default=Path("phaseaware/reference/data"))
    p.add_argument("--probes", type=int, default=1024)
    p.add_argument("--seed", type=int, default=0, help="held-out seed (the trainer's --seed)")
    p.add_argument("--min-len", type=int, default=80)
    p.add_argument("--max-len", type=int, default=192)
    p.add_argument("--write-final", type=Path, default=None, help="training_metrics.json to update")
    args = p.parse_args()

    import torch

    from phaseaware.atomic import atomic_write_text
    from phaseaware.intervals import wilson_interval
    from phaseaware.reference.load import load_reference
    from phaseaware.reference.train import PERIOD, evaluate, heldout

    torch.set_num_threads(1)
    model, tok = load_reference(directory=args.model)
    probes = heldout(args.seed, args.probes, args.min_len, args.max_len)
    metrics = evaluate(model, tok, probes)
    acc, counts = metrics["per_residue_accuracy"], metrics["per_residue_count"]
    print(
        f"model {args.model}: {args.probes} held-out probes, {args.min_len}-{args.max_len} tokens"
    )
    print(f"{'residue':>7} {'accuracy':>9} {'95% interval':>15} {'probes':>7}")
    for r in range(PERIOD):
        hits = round(acc[r] * counts[r])
        lo, hi = wilson_interval(hits, counts[r])
        print(f"{r:>7} {acc[r]:>9.3f} {f'[{lo:.3f}, {hi:.3f}]':>15} {counts[r]:>7}")
    weak = min(range(PERIOD), key=lambda r: acc[r])
    rest_hits = sum(acc[r] * counts[r] for r in range(PERIOD) if r != weak)
    rest_n = sum(counts[r] for r in range(PERIOD) if r != weak)
    p1, p2 = acc[weak], rest_hits / rest_n
    pooled = (acc[weak] * counts[weak] + rest_hits) / (counts[weak] + rest_n)
    se = math.sqrt(pooled * (1 - pooled) * (1 / counts[weak] + 1 / rest_n)) or 1.0
    print(f"overall {metrics['overall_accuracy']:.3f}")
    print(
        f"weakest residue {weak}: {p1:.3f} vs the rest {p2:.3f} "
        f"(gap {100 * (p2 - p1):.1f} points, z = {(p2 - p1) / se:.2f})"
    )
    if args.write_final is not None:
        doc = json.loads(args.write_final.read_text()) if args.write_final.exists() else {}
        metrics["probes"] = {
            "count": args.probes,
            "seed": args.seed,
            "lengths_tokens": [args.min_len, args.max_len],
            "command": "python benchmarks/reference_heldout.py --model "
            f"{args.model} --probes {args.probes} --seed {args.seed} "
            f"--min-len {args.min_len} --max-len {args.max_len}",
        }
        doc["final"] = metrics
        atomic_write_text(args.write_final, json.dumps(doc, indent=2) + "\n")
        print(f"wrote final metrics to {args.write_final}")


if __name__ == "__main__":
    main()
