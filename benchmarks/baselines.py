"""The benchmarks' baseline: one encode by the model's own tokenizer.

For a Hugging Face tokenizer that is the Rust ``tokenizers`` backend, what any pipeline
counting tokens pays, whichever engine phaseaware's own ``encode`` uses (the rank-BPE
twin, ``phaseaware.tokenizers.rank_bpe``, once a process has encoded 1M characters);
for tiktoken it is ``tok.encode``.
"""

from __future__ import annotations

from collections.abc import Callable

from phaseaware.tokenizers import Tokenizer
from phaseaware.tokenizers.hf import HFTokenizer


def model_encode(tok: Tokenizer) -> Callable[[str], object]:
    """``encode(text)`` by the model's own tokenizer (no special tokens added)."""
    if isinstance(tok, HFTokenizer):
        backend = tok.backend
        return lambda text: backend.encode_batch_fast([text], add_special_tokens=False)
    return tok.encode
