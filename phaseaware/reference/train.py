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

import numpy as np

from phaseaware.reference.synth import TURN_TOKENS, Example, make_example, make_recall_example

PERIOD = 8


def _records_that_fit(total_tokens: int) -> int:
    """Records (8 tokens each) that fit in a sequence beside the question and answer."""
    return (total_tokens - 16) // 8


def _batch(
    rng: np.random.Generator,
    tok,
    size: int,
    min_len: int,
    max_len: int,
    *,
    repeats: int = 0,
    max_records: int = 8,
    recall: float = 0.0,
    pools: dict | None = None,
    questions: int = 1,
    recall_qa: bool = False,
    near: float = 0.0,
) -> list[Example]:
    """``size`` training sequences; a ``recall`` fraction are dense recall sequences."""
    out = []
    for _ in range(size):
        total = int(rng.integers(min_len, max_len + 1))
        if recall and rng.random() < recall:
            out.append(make_recall_example(rng, total_tokens=total, qa=recall_qa))
            continue
        fit = _records_that_fit(total)
        n_records = min(int(rng.integers(2, max_records + 1)), fit)
        n_questions = 1
        if questions > 1:
            # Follow-up turns take TURN_TOKENS (12) each, about 1.5 records' room.
            room = (total - 16 - 8 * n_records) // TURN_TOKENS
            n_questions = 1 + min(questions - 1, n_records - 1, max(room, 0))
        fit -= -(-TURN_TOKENS * (n_questions - 1) // 8)  # records' room the turns take
        n_repeats = min(int(rng.integers(0, repeats + 1)), max(fit - n_records, 0))
        out.append(
            make_example(
                rng,
                total_tokens=total,
                n_records=n_records,
                repeats=n_repeats,
                questions=n_questions,
                target_last=bool(near) and rng.random() < near,
                **(pools or {}),
            )
        )
    return out


def _tensors(examples: list[Example], tok):
    import torch

    ids = [tok(e.text, add_special_tokens=False)["input_ids"] for e in examples]
    width = max(len(i) for i in ids)
    pad = tok.pad_token_id
    x = torch.full((len(ids), width), pad, dtype=torch.long)
    for row, seq in enumerate(ids):
        x[row, : len(seq)] = torch.tensor(seq)
    ans = torch.tensor([e.answer_position for e in examples])
    aux = [(row, p) for row, e in enumerate(examples) for p in e.repeat_answer_positions]
    return x, ans, aux


def _loss(model, x, ans, aux=(), lm_weight: float = 0.0, pad_id: int = -100):
    import torch
    from torch.nn import functional as F

    hidden = model.model(x)
    rows = torch.arange(x.shape[0])
    # Predict the answer from the token before it, and <eos> from the answer.
    pos = torch.stack([ans - 1, ans], dim=1)
    tgt = torch.stack([x[rows, ans], x[rows, ans + 1]], dim=1)
    logits = model.lm_head(hidden[rows.unsqueeze(1), pos])
    loss = F.cross_entropy(logits.reshape(-1, logits.shape[-1]), tgt.reshape(-1))
    if aux:
        r, p = (torch.tensor(v) for v in zip(*aux, strict=True))
        # Repeated records: their number is predictable only by recall.
        loss = loss + F.cross_entropy(model.lm_head(hidden[r, p - 1]), x[r, p])
    if lm_weight:
        # Plain next-token loss on every token: it teaches the positional heads
        # (previous-token and the like) that the retrieval circuit is built from.
        lm_logits = model.lm_head(hidden[:, :-1])
        lm = F.cross_entropy(
            lm_logits.reshape(-1, lm_logits.shape[-1]), x[:, 1:].reshape(-1), ignore_index=pad_id
        )
        loss = loss + lm_weight * lm
    correct = logits[:, 0].argmax(-1) == tgt[:, 0]
    return loss, correct


def evaluate(model, tok, examples: list[Example], batch_size: int = 64) -> dict:
    """Per-residue accuracy (fraction) of the greedy answer token on ``examples``."""
    import torch

    hits = np.zeros(PERIOD)
    counts = np.zeros(PERIOD)
    model.eval()
    with torch.no_grad():
        for i in range(0, len(examples), batch_size):
            chunk = examples[i : i + batch_size]
            x, ans, _ = _tensors(chunk, tok)
            _, correct = _loss(model, x, ans)
            for e, ok in zip(chunk, correct.tolist(), strict=True):
                counts[e.key_position % PERIOD] += 1
                hits[e.key_position % PERIOD] += ok
    model.train()
    acc = hits / np.maximum(counts, 1)
    return {
        "per_residue_accuracy": [round(float(a), 4) for a in acc],
        "per_residue_count": [int(c) for c in counts],
        "overall_accuracy": round(float(hits.sum() / counts.sum()), 4),
    }


def heldout(seed: int, n: int, min_len: int, max_len: int, local_window: int = 16):
    """Held-out probes whose target key lies outside the answer's local window."""
    rng = np.random.default_rng([seed, 99991])
    out: list[Example] = []
    while len(out) < n:
        total = int(rng.integers(min_len, max_len + 1))
        e = make_example(
            rng,
            total_tokens=total,
            n_records=min(int(rng.integers(2, 9)), _records_that_fit(total)),
        )
        if e.answer_position - 1 - e.key_position >= local_window + PERIOD:
            out.append(e)
    return out


def _class_init(model, tok, std: float, seed: int) -> None:
    """Give each word class a shared direction in the initial embeddings.

    Names, numbers and the remaining words each get one random vector added
    to their rows; the rows stay random otherwise. Classes are what the
    retrieval circuit must tell apart (attend to names, copy numbers); with
    purely random rows that has to be learned token by token, which is the
    long plateau of training from scratch.
    """
    import torch

    from phaseaware.calibration.task import NAMES, NUMBERS

    vocab = tok.get_vocab()
    classes = {
        "names": [vocab[w] for w in NAMES],
        "numbers": [vocab[w] for w in NUMBERS],
    }
    taken = {i for ids in classes.values() for i in ids}
    classes["other"] = [i for i in vocab.values() if i not in taken]
    gen = torch.Generator().manual_seed(seed + 7)
    emb = model.get_input_embeddings().weight
    with torch.no_grad():
        for ids in classes.values():
            shared = torch.randn(emb.shape[1], generator=gen) * std
            emb[torch.tensor(ids)] += shared


def _match_init(model, *, raw: bool, copy: bool) -> None:
    """Start every attention layer able to match like with like.

    The compressed-key map (and with ``raw`` the raw key map too) starts equal
    to the query map, so a query scores highest the windows whose content
    resembles its own. ``raw`` also makes every token match itself in the
    local window, which stalls training; the compressed-only variant does not
    (a token never sees its own window compressed). With ``copy`` the output
    map starts as the transpose of the value maps, so what a head reads is
    written back along the same directions. Everything stays trainable.
    """
    import torch

    with torch.no_grad():
        for layer in model.model.layers:
            attn = layer.attn
            if raw:
                attn.k_proj.weight.copy_(attn.q_proj.weight)
            attn.ck_proj.weight.copy_(attn.q_proj.weight)
            if copy:
                attn.cv_proj.weight.copy_(attn.v_proj.weight)
                attn.o_proj.weight.copy_(attn.v_proj.weight.t())


def _starting_point(model, tok, args) -> None:
    """Apply the optional initialisations of a fresh run (none when continuing one)."""
    if args.class_init:
        _class_init(model, tok, args.init_std, args.seed)
    if args.match_init:
        _match_init(
            model, raw=args.match_init.startswith("qk"), copy=args.match_init.endswith("+ov")
        )
    if args.shift_init and args.query_shift:
        import torch

        weights = _shift_weights(args.shift_init, args.query_shift)
        with torch.no_grad():
            for layer in model.model.layers:
                for j, w in enumerate(weights):
                    layer.attn.shift_weight[j].fill_(w)


def _shift_weights(spec: str, query_shift: int) -> list[float]:
    """``"1.0"`` -> the same weight at every offset; ``"0,2"`` -> one weight per offset."""
    values = [float(v) for v in spec.split(",")]
    if len(values) == 1:
        return values * query_shift
    if len(values) != query_shift:
        raise SystemExit(f"--shift-init needs 1 or {query_shift} values, got {spec!r}")
    return values


def _lr(step: int, steps: int, peak: float, warmup: int) -> float:
    if step < warmup:
        return peak * (step + 1) / warmup
    frac = (step - warmup) / max(1, steps - warmup)
    return peak * (0.1 + 0.9 * 0.5 * (1 + math.cos(math.pi * frac)))


def main(argv: list[str] | None = None) -> int:
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
    args = p.parse_args(argv)

    import torch

    from phaseaware.reference.configuration import PhaseRefConfig
    from phaseaware.reference.modeling import PhaseRefForCausalLM
    from phaseaware.reference.tokenizer_build import build_tokenizer

    torch.set_num_threads(args.threads)
    torch.manual_seed(args.seed)
    tok = build_tokenizer()
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
        _starting_point(model, tok, args)
    opt = torch.optim.AdamW(model.parameters(), lr=args.lr, weight_decay=0.01)
    rng = np.random.default_rng(args.seed)
    pools = None
    if args.pool_names or args.pool_numbers:
        from phaseaware.calibration.task import NAMES, NUMBERS

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
        batch = _batch(
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
        x, ans, aux = _tensors(batch, tok)
        loss, correct = _loss(model, x, ans, aux, args.lm_weight, tok.pad_token_id)
        opt.zero_grad()
        loss.backward()
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


def _write_report(args, history: list[dict], wall_s: float, n_params: int) -> None:
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
    (args.out / "training_metrics.json").write_text(json.dumps(doc, indent=2) + "\n")
    rows = "\n".join(
        f"| {r} | {a:.3f} | {c} |"
        for r, (a, c) in enumerate(zip(acc, final["per_residue_count"], strict=True))
    )
    (args.out / "TRAINING.md").write_text(
        f"# Reference model training\n\n"
        f"Command: `{command}`\n\nSeed: {args.seed}. Steps: {args.steps} (batch "
        f"{args.batch_size}, peak lr {args.lr}, lengths {args.min_len}-{args.max_len} "
        f"tokens, {args.threads} CPU threads). Parameters: {n_params}.\n\n"
        f"Wall time: {wall_s / 60:.1f} min.\n\n"
        f"Held-out retrieval accuracy by residue of the target key token "
        f"(absolute position mod {PERIOD}; {sum(final['per_residue_count'])} probes, "
        f"key outside the local window): overall {final['overall_accuracy']:.3f}.\n\n"
        f"| residue | accuracy | probes |\n|---|---|---|\n{rows}\n"
    )


if __name__ == "__main__":
    sys.exit(main())
