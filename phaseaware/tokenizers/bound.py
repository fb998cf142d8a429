"""A sound lower bound on a text's token count from its length, without tokenizing it.

For a vocabulary whose longest token spans ``K`` bytes of UTF-8, and a tokenizer that
maps every input byte to exactly one token's bytes (nothing normalised away, nothing
dropped, no unknown token standing for a longer span), a text of ``n`` characters
(at least ``n`` bytes) has at least ``ceil(n / K)`` tokens, wherever it sits in a
prompt: boundary merges only join bytes that are all in the prompt. :func:`max_token_bytes`
returns ``K`` for the families where that holds by construction (tiktoken; Hugging Face
byte-level BPE with no normaliser and pre-tokenisers that keep every byte), else ``None``
(no bound is claimed). ``K`` counts special/added tokens too, and never less than 4 (one
UTF-8 character).
"""

from __future__ import annotations

import json
import threading
from typing import Any

from phaseaware.tokenizers.base import Tokenizer

__all__ = ["max_token_bytes", "min_tokens"]

_CACHE: dict[str, int | None] = {}  # by vocabulary fingerprint: one value per vocabulary
_LOCK = threading.Lock()
_KEEPING = {"Isolated", "MergedWithPrevious", "MergedWithNext", "Contiguous"}


def min_tokens(chars: int, k: int) -> int:
    """The fewest tokens ``chars`` characters can take when no token spans over ``k`` bytes."""
    return -(-chars // k)


def max_token_bytes(tokenizer: Tokenizer) -> int | None:
    """``K``: the most UTF-8 bytes one token can cover, or ``None`` where none is sound."""
    key = tokenizer.fingerprint()
    with _LOCK:
        if key in _CACHE:
            return _CACHE[key]
    value = _compute(tokenizer)
    with _LOCK:
        _CACHE[key] = value
    return value


def _compute(tokenizer: Tokenizer) -> int | None:
    from phaseaware.tokenizers.hf import HFTokenizer
    from phaseaware.tokenizers.tiktoken import TiktokenTokenizer

    if isinstance(tokenizer, TiktokenTokenizer):
        # the adapter's per-id byte lengths (built once, specials included; gaps are 0)
        specials = [len(s.encode("utf-8")) for s in tokenizer.encoding.special_tokens_set]
        return max([max(tokenizer.token_byte_lengths()), 4, *specials])
    if isinstance(tokenizer, HFTokenizer):
        return _hf_byte_level(tokenizer.backend)
    return None


def _hf_byte_level(backend: Any) -> int | None:
    doc = json.loads(backend.to_str())
    normalizer = doc.get("normalizer")
    if normalizer is not None and not (
        normalizer.get("type") == "Sequence" and not normalizer.get("normalizers")
    ):
        return None
    if (doc.get("decoder") or {}).get("type") != "ByteLevel":
        return None
    if (doc.get("model") or {}).get("type") != "BPE" or not _keeps_every_byte(
        doc.get("pre_tokenizer")
    ):
        return None
    # byte-level vocabulary strings hold one character per byte (each 1-2 UTF-8 bytes):
    # their UTF-8 length is never below the bytes they cover
    vocab = backend.get_vocab(with_added_tokens=True)
    return max(4, *(len(token.encode("utf-8")) for token in vocab))


def _keeps_every_byte(pre: Any) -> bool:
    if pre is None:
        return True
    kind = pre.get("type")
    if kind == "Sequence":
        return all(_keeps_every_byte(p) for p in pre.get("pretokenizers", []))
    if kind in ("Split", "Punctuation"):
        return pre.get("behavior") in _KEEPING
    return kind in ("ByteLevel", "Digits")
