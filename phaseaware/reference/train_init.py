"""Optional initialisations of a fresh reference-model training run."""

from __future__ import annotations

import argparse
from typing import TYPE_CHECKING

from phaseaware.calibration.task import NAMES, NUMBERS

if TYPE_CHECKING:
    from transformers import PreTrainedTokenizerFast

    from phaseaware.reference.modeling import Block, PhaseRefForCausalLM

__all__ = ["class_init", "match_init", "starting_point", "shift_weights"]


def class_init(
    model: PhaseRefForCausalLM, tok: PreTrainedTokenizerFast, std: float, seed: int
) -> None:
    """Give each word class a shared direction in the initial embeddings.

    Names, numbers and the remaining words each get one random vector added
    to their rows; the rows stay random otherwise. Classes are what the
    retrieval circuit must tell apart (attend to names, copy numbers); with
    purely random rows that has to be learned token by token, which is the
    long plateau of training from scratch.
    """
    import torch

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


def match_init(model: PhaseRefForCausalLM, *, raw: bool, copy: bool) -> None:
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
        for layer in _blocks(model):
            attn = layer.attn
            if raw:
                attn.k_proj.weight.copy_(attn.q_proj.weight)
            attn.ck_proj.weight.copy_(attn.q_proj.weight)
            if copy:
                attn.cv_proj.weight.copy_(attn.v_proj.weight)
                attn.o_proj.weight.copy_(attn.v_proj.weight.t())


def starting_point(
    model: PhaseRefForCausalLM, tok: PreTrainedTokenizerFast, args: argparse.Namespace
) -> None:
    """Apply the optional initialisations of a fresh run (none when continuing one)."""
    if args.class_init:
        class_init(model, tok, args.init_std, args.seed)
    if args.match_init:
        match_init(
            model, raw=args.match_init.startswith("qk"), copy=args.match_init.endswith("+ov")
        )
    if args.shift_init and args.query_shift:
        import torch

        weights = shift_weights(args.shift_init, args.query_shift)
        with torch.no_grad():
            for layer in _blocks(model):
                for j, w in enumerate(weights):
                    layer.attn.shift_weight[j].fill_(w)


def _blocks(model: PhaseRefForCausalLM) -> list[Block]:
    """The model's transformer blocks (``model.model.layers``), typed."""
    from phaseaware.reference.modeling import Block

    blocks = [layer for layer in model.model.layers if isinstance(layer, Block)]
    if len(blocks) != len(model.model.layers):
        raise TypeError("model.model.layers must hold only reference-model Blocks")
    return blocks


def shift_weights(spec: str, query_shift: int) -> list[float]:
    """``"1.0"`` -> the same weight at every offset; ``"0,2"`` -> one weight per offset."""
    values = [float(v) for v in spec.split(",")]
    if len(values) == 1:
        return values * query_shift
    if len(values) != query_shift:
        raise SystemExit(f"--shift-init needs 1 or {query_shift} values, got {spec!r}")
    return values
