"""The tokenizer protocol every adapter implements, and its optional capabilities.

Convention (the one thing everything else relies on): a prompt is a *string*
that contains every token the model sees, BOS and template markers included,
and ``encode(text)`` returns exactly the ids the model sees, in order. Absolute
position ``t`` of a token is its index in that list (BOS = position 0).
Special-token strings inside the text (``<|im_start|>``, ``<｜User｜>``) are
parsed as special tokens; no BOS/EOS is added implicitly.

:class:`Tokenizer` is all phaseaware needs. A tokenizer may also declare optional
capabilities, each a runtime-checkable protocol that callers test with
``isinstance`` (never ``getattr``), so a third-party tokenizer that implements
only :class:`Tokenizer` takes the generic path on purpose:

- :class:`BatchTokenizer`: ``tokenize_batch(texts)``, equal to
  ``[tokenize(t) for t in texts]`` but cheaper;
- :class:`ParallelBatchTokenizer`: a ``BatchTokenizer`` whose ``parallel_batch``
  says whether one batch of short texts beats one long call (Rust threads);
- :class:`CharIndexTokenizer`: ``char_index(text)``, the token count and
  char → token lookups of ``tokenize`` without building tuples of ids;
- :class:`ChatTemplateTokenizer`: ``chat_template`` and ``render_chat(messages)``,
  the tokenizer's own chat template (used by the ``hf`` layout).
"""

from __future__ import annotations

import bisect
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Protocol, runtime_checkable

from phaseaware.caches import BoundedCache

if TYPE_CHECKING:
    from phaseaware.tokenizers.offsets import TokenStarts

__all__ = [
    "BatchTokenizer",
    "CharIndexTokenizer",
    "ChatTemplateTokenizer",
    "ParallelBatchTokenizer",
    "TokenizedText",
    "Tokenizer",
    "implements",
]


@dataclass(frozen=True)
class TokenizedText:
    """Token ids of ``text`` with the character offset where each token starts.

    Invariants: ``len(ids) == len(starts)``; ``starts`` is non-decreasing;
    ``starts[i]`` is the index (in characters of ``text``) of the character that
    contains the first byte of token ``i``. A character split across several
    byte-level tokens is shared by them; the first of those tokens starts there.
    """

    text: str
    ids: tuple[int, ...]
    starts: tuple[int, ...]

    def __len__(self) -> int:
        return len(self.ids)

    def token_at_char(self, char_offset: int) -> int:
        """Index of the first token that contains character ``char_offset``.

        A character split across several byte-level tokens belongs to all of
        them; the first one (holding its first byte) is returned, which is the
        token a key beginning at that character starts in.
        """
        if not 0 <= char_offset < len(self.text):
            raise IndexError(f"char offset {char_offset} outside text of {len(self.text)} chars")
        first = bisect.bisect_left(self.starts, char_offset)
        if first < len(self.starts) and self.starts[first] == char_offset:
            return first
        return bisect.bisect_right(self.starts, char_offset) - 1

    def token_span(self, char_start: int, char_end: int) -> tuple[int, int]:
        """Tokens ``[first, end)`` that cover characters ``[char_start, char_end)``.

        ``first`` holds the first byte of ``char_start``; ``end - 1`` is the last
        token holding a byte of ``char_end - 1``. The span is non-empty.
        """
        if not 0 <= char_start < char_end <= len(self.text):
            raise IndexError(
                f"char span [{char_start}, {char_end}) invalid for text of {len(self.text)} chars"
            )
        return self.token_at_char(char_start), bisect.bisect_right(self.starts, char_end - 1)

    def char_span(self, index: int) -> tuple[int, int]:
        """Character span ``[start, end)`` covered by token ``index``."""
        end = self.starts[index + 1] if index + 1 < len(self.starts) else len(self.text)
        return self.starts[index], max(end, self.starts[index] + 1)


@runtime_checkable
class Tokenizer(Protocol):
    """What phaseaware needs from a tokenizer."""

    @property
    def spec(self) -> str:
        """The spec string that loads this tokenizer again (``tiktoken:cl100k_base``)."""
        ...

    @property
    def bos_text(self) -> str:
        """Text of the BOS token, or ``""`` if the tokenizer has none."""
        ...

    def encode(self, text: str) -> list[int]:
        """Ids of ``text`` (special-token strings parsed, nothing added)."""
        ...

    def tokenize(self, text: str) -> TokenizedText:
        """Ids plus per-token start offsets in characters."""
        ...

    def decode(self, ids: list[int]) -> str:
        """Text of ``ids``."""
        ...

    def fingerprint(self) -> str:
        """Stable hash of the vocabulary (``sha256:<hex>``); equal iff same tokenizer."""
        ...


@runtime_checkable
class BatchTokenizer(Protocol):
    """Optional capability: many texts tokenized in one call."""

    def tokenize_batch(self, texts: Sequence[str]) -> list[TokenizedText]:
        """``[tokenize(t) for t in texts]``, computed in one pass."""
        ...


@runtime_checkable
class ParallelBatchTokenizer(BatchTokenizer, Protocol):
    """Optional capability: a batch tokenizer that says whether batches run in parallel.

    ``parallel_batch`` is ``True`` when ``tokenize_batch`` of many short texts is
    faster than one ``tokenize`` of their concatenation (the Hugging Face Rust
    backend's threads), ``False`` when the long single call wins (tiktoken).
    """

    @property
    def parallel_batch(self) -> bool: ...


@runtime_checkable
class CharIndexTokenizer(Protocol):
    """Optional capability: token count and char → token lookups without tuples."""

    def char_index(self, text: str) -> TokenStarts:
        """The same ``len`` and ``token_at_char`` as ``tokenize(text)``, cheaper."""
        ...


@runtime_checkable
class ChatTemplateTokenizer(Protocol):
    """Optional capability: the tokenizer's own chat template.

    ``chat_template`` is the template source, or ``None`` when this tokenizer has
    none (then ``render_chat`` raises :class:`~phaseaware.errors.TemplateError`);
    ``spec`` names the tokenizer in error messages.
    """

    @property
    def spec(self) -> str: ...

    @property
    def chat_template(self) -> str | None: ...

    def render_chat(
        self,
        messages: Sequence[Mapping[str, Any]],
        *,
        add_generation_prompt: bool = True,
        **kwargs: Any,
    ) -> str:
        """The chat template applied to ``messages``, as text (nothing tokenized)."""
        ...


# capability answers by tokenizer object (the entry holds it, so its id is not reused
# meanwhile): a runtime protocol check reads every member's name (~5-15 us), asked a few
# times per assemble about the same long-lived tokenizer
_CAPABLE: BoundedCache[tuple[int, type], tuple[object, bool]] = BoundedCache(
    max_entries=256, name="tokenizers.capabilities"
)


def implements(tokenizer: object, capability: type) -> bool:
    """``isinstance(tokenizer, capability)`` for a runtime-checkable protocol, remembered
    per tokenizer object (an adapter's capabilities do not change after it is built)."""
    key = (id(tokenizer), capability)
    known = _CAPABLE.get(key)
    if known is not None and known[0] is tokenizer:
        return known[1]
    found = isinstance(tokenizer, capability)
    _CAPABLE.put(key, (tokenizer, found))
    return found
