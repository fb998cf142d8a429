"""How fast can a small model learn associative recall? (diagnostic for issue 4)

Trains a fresh 4-layer, width-128 model for a few hundred steps on synthetic
associative recall and prints the answer accuracy as it trains. It separates
"the compressor is hard to learn" from "the task is hard to learn": the same
data goes to the reference model (chunked KV compression, 16-token local
window), to the same model with full attention (local window 1024, so no
compressed entry is ever used) and to a transformers GPT-2 of the same size.

Tasks (one token = one symbol; 64 keys, ``--values`` values, 32 filler symbols):

* ``offset``: predict the token ``--offset`` positions back (positional copy);
* ``recall``: 4 key-value pairs in filler, then a query key; loss on its value only;
* ``dense``: 8 pairs in the first half, all 8 queried (key, value) in the second
  half; loss on every queried value.

Usage::

    python benchmarks/reference_learnability.py --model ref --task recall --steps 1000
"""

from __future__ import annotations

import argparse
import time

import torch
from torch.nn import functional as F

N_KEYS, N_FILLER, FIRST = 64, 32, 3  # ids 0-2 are special


def build_model(kind: str, vocab: int, init_std: float) -> torch.nn.Module:
    from phaseaware.reference.configuration import PhaseRefConfig
    from phaseaware.reference.modeling import PhaseRefForCausalLM

    if kind == "gpt2":
        from transformers import GPT2Config, GPT2LMHeadModel

        config = GPT2Config(
            vocab_size=vocab, n_positions=256, n_embd=128, n_layer=4, n_head=4, bos_token_id=0
        )
        config.eos_token_id = 1
        return GPT2LMHeadModel(config)
    local = {"ref": 16, "full": 1024}[kind]
    config = PhaseRefConfig(
        vocab_size=vocab,
        local_window=local,
        initializer_range=init_std,
        tie_word_embeddings=True,
    )
    return PhaseRefForCausalLM(config)


def make_batch(task: str, gen: torch.Generator, *, batch: int, length: int, values: int):
    """Token ids (batch, length) and a bool mask of the positions whose NEXT token is scored."""
    lo_val, lo_fill = FIRST + N_KEYS, FIRST + N_KEYS + values
    x = torch.randint(lo_fill, lo_fill + N_FILLER, (batch, length), generator=gen)
    x[:, 0] = 0
    scored = torch.zeros(batch, length, dtype=torch.bool)
    if task == "offset":
        return x, scored  # handled by the caller
    pairs = 4 if task == "recall" else 8
    for b in range(batch):
        keys = torch.randperm(N_KEYS, generator=gen)[:pairs] + FIRST
        vals = torch.randint(lo_val, lo_val + values, (pairs,), generator=gen)
        span = length - 4 if task == "recall" else length // 2 - 2
        slots = torch.randperm(span // 3, generator=gen)[:pairs] * 3 + 1
        for k, v, s in zip(keys, vals, slots, strict=True):
            x[b, s], x[b, s + 1] = k, v
        if task == "recall":
            i = int(torch.randint(pairs, (1,), generator=gen))
            x[b, length - 2], x[b, length - 1] = keys[i], vals[i]
            scored[b, length - 2] = True
        else:
            half = length // 2
            qslots = torch.randperm((length - half - 2) // 3, generator=gen)[:pairs] * 3 + half
            for i, s in zip(torch.randperm(pairs, generator=gen), qslots, strict=True):
                x[b, s], x[b, s + 1] = keys[i], vals[i]
                scored[b, s] = True
    return x, scored


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--model", choices=["ref", "full", "gpt2"], default="ref")
    p.add_argument("--task", choices=["offset", "recall", "dense"], default="recall")
    p.add_argument("--steps", type=int, default=1000)
    p.add_argument("--values", type=int, default=300)
    p.add_argument("--length", type=int, default=64)
    p.add_argument("--offset", type=int, default=2)
    p.add_argument("--lr", type=float, default=3e-3)
    p.add_argument("--init-std", type=float, default=0.02)
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--every", type=int, default=100)
    p.add_argument(
        "--class-init",
        action="store_true",
        help="add one shared random direction per symbol class (keys, values, filler)",
    )
    args = p.parse_args()

    torch.set_num_threads(1)
    torch.manual_seed(args.seed)
    gen = torch.Generator().manual_seed(args.seed)
    vocab = FIRST + N_KEYS + args.values + N_FILLER
    model = build_model(args.model, vocab, args.init_std)
    if args.class_init:
        emb = model.get_input_embeddings().weight
        lo_val, lo_fill = FIRST + N_KEYS, FIRST + N_KEYS + args.values
        with torch.no_grad():
            for lo, hi in [(FIRST, lo_val), (lo_val, lo_fill), (lo_fill, vocab)]:
                emb[lo:hi] += torch.randn(emb.shape[1], generator=gen) * args.init_std
    opt = torch.optim.AdamW(model.parameters(), lr=args.lr)
    print(f"model={args.model} task={args.task} values={args.values} lr={args.lr}")
    print(f"{'step':>6} {'loss':>7} {'accuracy':>9} {'chance':>7} {'seconds':>8}")
    chance = 1.0 / args.values if args.task != "offset" else 1.0 / N_FILLER
    start, window = time.time(), []
    for step in range(1, args.steps + 1):
        x, scored = make_batch(args.task, gen, batch=32, length=args.length, values=args.values)
        logits = model(input_ids=x).logits
        if args.task == "offset":
            pred, target = logits[:, args.offset :], x[:, : -args.offset]
        else:
            pred, target = logits[:, :-1][scored[:, :-1]], x[:, 1:][scored[:, :-1]]
        loss = F.cross_entropy(pred.reshape(-1, vocab), target.reshape(-1))
        opt.zero_grad()
        loss.backward()
        opt.step()
        window.append((pred.argmax(-1) == target).float().mean().item())
        if step % args.every == 0:
            acc = sum(window) / len(window)
            window = []
            print(
                f"{step:>6} {loss.item():>7.3f} {acc:>9.3f} {chance:>7.3f} "
                f"{time.time() - start:>8.0f}",
                flush=True,
            )


if __name__ == "__main__":
    main()
