"""Windowed re-tokenization as a tokenizer capability (the speed seam of verification).

Verification re-tokenizes a whole prompt. Where a tokenizer family has a proven cut
rule (:mod:`phaseaware.tokenizers.cuts`: positions at which its tokens of a text are
the tokens of the two sides), assembly encodes only the junctions between cached chunk
cores instead. A tokenizer adapter declares that it can by implementing
:class:`WindowedTokenizer`; assembly asks the protocol, never the concrete class, and a
tokenizer that does not implement it (or says why not) is encoded in full.

Implemented by ``TiktokenTokenizer`` (cl100k/o200k regexes) and ``HFTokenizer``
(DeepSeek-V4's config, :mod:`phaseaware.tokenizers.hf_windowed`).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Protocol, runtime_checkable

import numpy as np

from phaseaware.tokenizers.cuts import CutRule

__all__ = [
    "MIN_CORE",
    "NOT_WINDOWED",
    "StartsBatchTokenizer",
    "WindowRecipe",
    "WindowedTokenizer",
]

# shorter chunk cores are left in the junction (not worth a cache entry); a tiktoken
# special token as long as a core could hide inside one, so such vocabularies are refused
MIN_CORE = 16

NOT_WINDOWED = (
    "the windowed argument is made for tiktoken's regex pre-tokenizers and "
    "DeepSeek-V4's Hugging Face config only"
)

Encode = Callable[[str], np.ndarray]  # text -> its token char starts (int64)


@dataclass(frozen=True, eq=False)
class WindowRecipe:
    """How to re-tokenize one family in windows: its cut rule, its one-text encode, and
    ``bar_specials`` (tiktoken: chunks with ``|`` get no core, joins split near ``|``)."""

    cuts: CutRule
    encode: Encode
    bar_specials: bool


@runtime_checkable
class WindowedTokenizer(Protocol):
    """Optional capability: windowed re-tokenization is proven sound for this tokenizer."""

    def window_support(self) -> str | None:
        """None when :meth:`window_recipe` is sound; else why not (reported, not raised)."""
        ...

    def window_recipe(self) -> WindowRecipe | None:
        """The recipe, or None where :meth:`window_support` names a reason."""
        ...


@runtime_checkable
class StartsBatchTokenizer(Protocol):
    """Optional capability: token start characters of many texts as int64 arrays, in one
    call (no per-token Python objects)."""

    def token_starts_batch(self, texts: Sequence[str]) -> list[np.ndarray]: ...
