"""The HF vocabulary fingerprint as first written (get_vocab, sorted, one sha256 update per
entry): the oracle the fast fingerprint of ``phaseaware.tokenizers.hf`` must equal."""

from __future__ import annotations

import hashlib
from typing import Any

__all__ = ["slow_fingerprint"]


def slow_fingerprint(backend: Any) -> str:
    digest = hashlib.sha256(b"phaseaware-vocab-v1\0hf\0")
    vocab = backend.get_vocab(with_added_tokens=True)
    for token, token_id in sorted(vocab.items(), key=lambda kv: (kv[1], kv[0])):
        digest.update(f"{token_id}\0{token}\n".encode("utf-8", "surrogatepass"))
    digest.update(b"\0added\0")
    for token_id, token in sorted(backend.get_added_tokens_decoder().items()):
        digest.update(f"{token_id}\0{token.content}\0{int(token.special)}\n".encode())
    return "sha256:" + digest.hexdigest()
