"""Training and held-out data of the reference model, and the loss it is trained on.

Sequences come from :mod:`phaseaware.reference.synth`; lengths are in tokens of
the reference tokenizer. ``evaluate`` scores the greedy answer token by key
residue (``key_position mod PERIOD``).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any

import numpy as np

from phaseaware.reference.synth import TURN_TOKENS, Example, make_example, make_recall_example

if TYPE_CHECKING:
    import torch
    from transformers import PreTrainedTokenizerFast

    from phaseaware.reference.modeling import PhaseRefForCausalLM

__all__ = [
    "PERIOD",
    "records_that_fit",
    "make_batch",
    "tensors",
    "loss_and_hits",
    "evaluate",
    "heldout",
]

PERIOD = 8


def records_that_fit(total_tokens: int) -> int:
    """Records (8 tokens each) that fit in a sequence beside the question and answer."""
    return (total_tokens - 16) // 8


def make_batch(
    rng: np.random.Generator,
    tok: PreTrainedTokenizerFast,
    size: int,
    min_len: int,
    max_len: int,
    *,
    repeats: int = 0,
    max_records: int = 8,
    recall: float = 0.0,
    pools: Mapping[str, Sequence[str]] | None = None,
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
        fit = records_that_fit(total)
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


def tensors(
    examples: list[Example], tok: PreTrainedTokenizerFast
) -> tuple[torch.Tensor, torch.Tensor, list[tuple[int, int]]]:
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


def loss_and_hits(
    model: PhaseRefForCausalLM,
    x: torch.Tensor,
    ans: torch.Tensor,
    aux: Sequence[tuple[int, int]] = (),
    lm_weight: float = 0.0,
    pad_id: int = -100,
) -> tuple[torch.Tensor, torch.Tensor]:
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


def evaluate(
    model: PhaseRefForCausalLM,
    tok: PreTrainedTokenizerFast,
    examples: list[Example],
    batch_size: int = 64,
) -> dict[str, Any]:
    """Per-residue accuracy (fraction) of the greedy answer token on ``examples``."""
    import torch

    hits = np.zeros(PERIOD)
    counts = np.zeros(PERIOD)
    # transformers' PreTrainedModel.eval() is unannotated (it is self.train(False)).
    model.eval()  # type: ignore[no-untyped-call]
    with torch.no_grad():
        for i in range(0, len(examples), batch_size):
            chunk = examples[i : i + batch_size]
            x, ans, _ = tensors(chunk, tok)
            _, correct = loss_and_hits(model, x, ans)
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


def heldout(seed: int, n: int, min_len: int, max_len: int, local_window: int = 16) -> list[Example]:
    """Held-out probes whose target key lies outside the answer's local window."""
    rng = np.random.default_rng([seed, 99991])
    out: list[Example] = []
    while len(out) < n:
        total = int(rng.integers(min_len, max_len + 1))
        e = make_example(
            rng,
            total_tokens=total,
            n_records=min(int(rng.integers(2, 9)), records_that_fit(total)),
        )
        if e.answer_position - 1 - e.key_position >= local_window + PERIOD:
            out.append(e)
    return out
