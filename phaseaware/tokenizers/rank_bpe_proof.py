"""The check behind :data:`~phaseaware.tokenizers.rank_bpe.PROVEN`: merge-rule BPE equals rank BPE.

Not imported at run time (it takes seconds): the tests run it on every proven model,
and a maintainer runs it before adding one::

    from phaseaware.tokenizers.rank_bpe_proof import rank_bpe_failures, model_digest
    rank_bpe_failures(backend)  # [] -> add model_digest(backend) to PROVEN

The two facts (see :mod:`phaseaware.tokenizers.rank_bpe`, fact 1): (a) the id of each
merged token rises with the merge order (tiktoken ranks tokens by id); (b) for every
rule ``(a, b) -> t``, rank BPE of ``t``'s bytes using only tokens of lower id ends at
exactly ``[a, b]``.
"""

from __future__ import annotations

import json
from typing import Any

from phaseaware.tokenizers.hf_vocab import byte_level_alphabet
from phaseaware.tokenizers.rank_bpe import model_digest

__all__ = ["model_digest", "rank_bpe_failures"]


def rank_bpe_failures(backend: Any, *, limit: int = 10) -> list[str]:
    """Up to ``limit`` reasons why rank BPE may differ from ``backend``'s BPE; [] when it cannot."""
    model = json.loads(backend.model.__getstate__())
    if model.get("type") != "BPE":
        return ["the model is not BPE"]
    flags = ("dropout", "unk_token", "continuing_subword_prefix", "end_of_word_suffix")
    set_flags = [f for f in flags if model.get(f) is not None]
    if set_flags or model.get("byte_fallback"):
        return [f"the model sets {', '.join(set_flags) or 'byte_fallback'}"]
    alphabet = byte_level_alphabet()

    def spelled(token: str) -> bytes | None:
        if any(c not in alphabet for c in token):
            return None
        return bytes(alphabet[c] for c in token)

    ranks: dict[bytes, int] = {}
    for token, token_id in model["vocab"].items():
        piece = spelled(token)
        if piece is not None:
            ranks[piece] = token_id
    failures: list[str] = []
    last = -1
    for rule in model["merges"]:
        left, right = rule.split(" ", 1) if isinstance(rule, str) else rule
        a, b = spelled(left), spelled(right)
        if a is None or b is None or a + b not in ranks:
            failures.append(f"rule {left!r} {right!r} makes no byte-level token")
        else:
            rank = ranks[a + b]
            if rank <= last:
                failures.append(f"rule {left!r} {right!r}: id {rank} after id {last}")
            last = max(last, rank)
            if _rank_bpe(a + b, ranks, below=rank) != [a, b]:
                failures.append(f"rule {left!r} {right!r}: rank BPE splits it otherwise")
        if len(failures) >= limit:
            break
    return failures


def _rank_bpe(text: bytes, ranks: dict[bytes, int], *, below: int) -> list[bytes]:
    """tiktoken's merge loop on ``text``, with the tokens of id ``< below`` only."""
    parts = [text[i : i + 1] for i in range(len(text))]
    while len(parts) > 1:
        best: tuple[int, int] | None = None
        for i in range(len(parts) - 1):
            rank = ranks.get(parts[i] + parts[i + 1])
            if rank is not None and rank < below and (best is None or rank < best[0]):
                best = (rank, i)
        if best is None:
            break
        i = best[1]
        parts[i : i + 2] = [parts[i] + parts[i + 1]]
    return parts
