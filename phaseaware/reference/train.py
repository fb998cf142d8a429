"""Train the reference model from scratch on CPU (seeded, deterministic data).

Usage::

    python -m phaseaware.reference.train --out DIR --steps N --seed 0

Writes into DIR: config.json, model.safetensors, the tokenizer files,
training_metrics.json and TRAINING.md (command, seed, wall time, per-residue
held-out retrieval accuracy). Loss: cross-entropy on the answer token and on
the ``<eos>`` after it. Lengths vary uniformly in [--min-len, --max-len] tokens.
"""

from __future__ import annotations

import argparse
import json
import math
import shlex
import sys
import time
from pathlib import Path
from typing import Any

import numpy as np

from phaseaware.calibration.task import NAMES, NUMBERS
from phaseaware.reference.train_data import (
    PERIOD,
    evaluate,
    heldout,
    loss_and_hits,
    make_batch,
    tensors,
)
from phaseaware.reference.train_init import starting_point

__all__ = ["PERIOD", "evaluate", "heldout", "main"]


def _lr(step: int, steps: int, peak: float, warmup: int) -> float:
    if step < warmup:
        return peak * (step + 1) / warmup
    frac = (step - warmup) / max(1, steps - warmup)
    return peak * (0.1 + 0.9 * 0.5 * (1 + math.cos(math.pi * frac)))


def _parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--out", required=True, type=Path)
    p.add_argument("--steps", type=int, default=2000)
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--batch-size", type=int, default=32)
    p.add_argument("--lr", type=float, default=2e-3)
    p.add_argument("--min-len", type=int, default=112)
    p.add_argument("--max-len", type=int, default=192)
    p.add_argument("--threads", type=int, default=1)
    p.add_argument(
        "--init-std", type=float, default=0.08, help="weight init std (0.02 stalls at chance)"
    )
    p.add_argument("--repeats", type=int, default=3, help="most repeated records per sequence")
    p.add_argument("--init-from", type=Path, default=None, help="continue from this run's folder")
    p.add_argument("--lm-weight", type=float, default=0.0, help="weight of next-token loss")
    p.add_argument(
        "--tie-embeddings",
        action="store_true",
        help="share input embeddings and output head (copying needs no per-token mapping)",
    )
    p.add_argument("--local-window", type=int, default=16, help="raw local window (tokens)")
    p.add_argument("--layers", type=int, default=4)
    p.add_argument(
        "--rope-dims", type=int, default=None, help="rotated dims per head (rest: content)"
    )
    p.add_argument(
        "--query-shift", type=int, default=0, help="previous tokens mixed into each query"
    )
    p.add_argument(
        "--class-init",
        action="store_true",
        help="add one shared random vector per word class (names, numbers, other) to the "
        "initial embeddings",
    )
    p.add_argument("--max-records", type=int, default=8, help="most distinct records")
    p.add_argument(
        "--match-init",
        choices=["qk", "qk+ov", "ck", "ck+ov"],
        default=None,
        help="start with the query map copied into the key maps (qk: raw and compressed, ck: "
        "compressed only), and also copy-like value/output maps (+ov)",
    )
    p.add_argument(
        "--recall-stage",
        action="store_true",
        help="train on dense Name-Number recall sequences (a first curriculum stage)",
    )
    p.add_argument(
        "--recall-mix",
        type=float,
        default=0.0,
        help="fraction of each batch drawn as dense recall sequences (keeps stage 1 alive)",
    )
    p.add_argument(
        "--questions",
        type=int,
        default=1,
        help="most questions per training sequence (follow-up chat turns about other records)",
    )
    p.add_argument(
        "--recall-qa",
        action="store_true",
        help="recall sequences in the task's shape (Name is Number / Name ? <|assistant|> Number)",
    )
    p.add_argument(
        "--near-question",
        type=float,
        default=0.0,
        help="fraction of sequences whose asked record comes right before the question "
        "(its key inside the raw local window)",
    )
    p.add_argument("--pool-names", type=int, default=0, help="train on the first N names only")
    p.add_argument("--pool-numbers", type=int, default=0, help="train on the first N numbers only")
    p.add_argument(
        "--shift-init",
        default="",
        help="initial query-shift weights: one value for every previous token, or one per "
        "offset (comma-separated, offset 1 first)",
    )
    p.add_argument(
        "--constant-lr", action="store_true", help="no warmup or cosine decay (peak lr throughout)"
    )
    p.add_argument("--clip", type=float, default=1.0, help="gradient-norm clip (0: none)")
    p.add_argument("--eval-every", type=int, default=250)
    p.add_argument("--eval-size", type=int, default=1024)
    return p


def _model(args: argparse.Namespace, tok: Any) -> Any:
    """A fresh model (with the optional initialisations) or the one ``--init-from`` names."""
    from phaseaware.reference.configuration import PhaseRefConfig
    from phaseaware.reference.modeling import PhaseRefForCausalLM

    config = PhaseRefConfig(
        vocab_size=len(tok),
        bos_token_id=tok.bos_token_id,
        eos_token_id=tok.eos_token_id,
        pad_token_id=tok.pad_token_id,
        initializer_range=args.init_std,
        tie_word_embeddings=args.tie_embeddings,
        local_window=args.local_window,
        query_shift=args.query_shift,
        rope_dims=args.rope_dims,
        num_hidden_layers=args.layers,
    )
    if args.init_from is not None:
        # Continue from an earlier run's weights (same tokenizer and config).
        model = PhaseRefForCausalLM.from_pretrained(str(args.init_from))
    else:
        model = PhaseRefForCausalLM(config)
    if args.init_from is None:
        starting_point(model, tok, args)
    return model


def main(argv: list[str] | None = None) -> int:
    args = _parser().parse_args(argv)

    import torch

    from phaseaware.reference.tokenizer_build import build_tokenizer

    torch.set_num_threads(args.threads)
    torch.manual_seed(args.seed)
    tok = build_tokenizer()
    model = _model(args, tok)
    opt = torch.optim.AdamW(model.parameters(), lr=args.lr, weight_decay=0.01)
    rng = np.random.default_rng(args.seed)
    pools = None
    if args.pool_names or args.pool_numbers:
        # A first curriculum stage on fewer distinct names/numbers (each seen more often).
        pools = {
            "names_pool": NAMES[: args.pool_names or len(NAMES)],
            "numbers_pool": NUMBERS[: args.pool_numbers or len(NUMBERS)],
        }
    evalset = heldout(args.seed, args.eval_size, args.min_len, args.max_len)
    history = []
    start = time.time()
    running = []
    for step in range(args.steps):
        for group in opt.param_groups:
            group["lr"] = args.lr if args.constant_lr else _lr(step, args.steps, args.lr, 100)
        batch = make_batch(
            rng,
            tok,
            args.batch_size,
            args.min_len,
            args.max_len,
            repeats=args.repeats,
            max_records=args.max_records,
            recall=1.0 if args.recall_stage else args.recall_mix,
            pools=pools,
            questions=args.questions,
            recall_qa=args.recall_qa,
            near=args.near_question,
        )
        x, ans, aux = tensors(batch, tok)
        loss, correct = loss_and_hits(model, x, ans, aux, args.lm_weight, tok.pad_token_id)
        opt.zero_grad()
        # torch's Tensor.backward is unannotated.
        loss.backward()  # type: ignore[no-untyped-call]
        if args.clip:
            torch.nn.utils.clip_grad_norm_(model.parameters(), args.clip)
        opt.step()
        running.append((loss.item(), correct.float().mean().item()))
        if (step + 1) % 50 == 0:
            mean_loss, mean_acc = np.mean(running, axis=0)
            running = []
            print(
                f"step {step + 1} loss {mean_loss:.3f} train_acc {mean_acc:.3f} t={time.time() - start:.0f}s"
            )
        if (step + 1) % args.eval_every == 0 or step + 1 == args.steps:
            metrics = evaluate(model, tok, evalset)
            metrics["step"] = step + 1
            metrics["elapsed_s"] = round(time.time() - start, 1)
            history.append(metrics)
            print("eval", json.dumps(metrics), flush=True)
            args.out.mkdir(parents=True, exist_ok=True)
            model.save_pretrained(str(args.out))
            tok.save_pretrained(str(args.out))
        sys.stdout.flush()
    wall = time.time() - start
    _write_report(args, history, wall, sum(p.numel() for p in model.parameters()))
    return 0


def _write_report(
    args: argparse.Namespace, history: list[dict[str, Any]], wall_s: float, n_params: int
) -> None:
    command = "python -m phaseaware.reference.train " + " ".join(
        shlex.quote(a) for a in sys.argv[1:]
    )
    final = history[-1]
    acc = final["per_residue_accuracy"]
    doc = {
        "command": command,
        "seed": args.seed,
        "steps": args.steps,
        "batch_size": args.batch_size,
        "lr": args.lr,
        "lengths_tokens": [args.min_len, args.max_len],
        "threads": args.threads,
        "repeats": args.repeats,
        "lm_weight": args.lm_weight,
        "init_from": None if args.init_from is None else str(args.init_from),
        "init_std": args.init_std,
        "wall_time_s": round(wall_s, 1),
        "n_parameters": n_params,
        "final": final,
        "history": history,
    }
    from phaseaware.atomic import atomic_write_text

    atomic_write_text(args.out / "training_metrics.json", json.dumps(doc, indent=2) + "\n")
    rows = "\n".join(
        f"| {r} | {a:.3f} | {c} |"
        for r, (a, c) in enumerate(zip(acc, final["per_residue_count"], strict=True))
    )
    atomic_write_text(
        args.out / "TRAINING.md",
        f"# Reference model training\n\n"
        f"Command: `{command}`\n\nSeed: {args.seed}. Steps: {args.steps} (batch "
        f"{args.batch_size}, peak lr {args.lr}, lengths {args.min_len}-{args.max_len} "
        f"tokens, {args.threads} CPU threads). Parameters: {n_params}.\n\n"
        f"Wall time: {wall_s / 60:.1f} min.\n\n"
        f"Held-out retrieval accuracy by residue of the target key token "
        f"(absolute position mod {PERIOD}; {sum(final['per_residue_count'])} probes, "
        f"key outside the local window): overall {final['overall_accuracy']:.3f}.\n\n"
        f"| residue | accuracy | probes |\n|---|---|---|\n{rows}\n",
    )


if __name__ == "__main__":
    sys.exit(main())
