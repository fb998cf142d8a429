"""Optional tokenizer capabilities assembly uses, as protocols checked with ``isinstance``.

TEMPORARY: these mirror the capability protocols ``phaseaware.tokenizers.base``
gains in the same change (issue 10); when both land, import them from there
and delete this module. The signatures are those of the shipped adapters
(``TiktokenTokenizer``, ``HFTokenizer``). A tokenizer without them (only the
base ``Tokenizer`` protocol) takes the generic path: ``tokenize`` on one text.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Protocol, runtime_checkable

from phaseaware.tokenizers.base import TokenizedText
from phaseaware.tokenizers.offsets import CharIndex

__all__ = ["SupportsBatchTokenize", "SupportsParallelBatch", "SupportsCharIndex"]


@runtime_checkable
class SupportsBatchTokenize(Protocol):
    """``tokenize_batch(texts)`` equals ``[tokenize(t) for t in texts]``."""

    def tokenize_batch(self, texts: Sequence[str]) -> list[TokenizedText]: ...


@runtime_checkable
class SupportsParallelBatch(SupportsBatchTokenize, Protocol):
    """A batch tokenizer that says whether its batch runs in parallel.

    ``parallel_batch`` true: one batch of many short texts is faster than one
    call on their concatenation (Rust threads); false: the other way round.
    """

    parallel_batch: bool


@runtime_checkable
class SupportsCharIndex(Protocol):
    """``char_index(text)``: ``len`` and ``token_at_char`` of ``tokenize(text)``, cheaper."""

    def char_index(self, text: str) -> CharIndex: ...
