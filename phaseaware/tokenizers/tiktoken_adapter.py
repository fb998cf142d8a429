"""Adapter from ``tiktoken.Encoding`` to the :class:`Tokenizer` protocol."""

from __future__ import annotations

import hashlib
import itertools
import threading
from collections.abc import Sequence
from typing import TYPE_CHECKING

import numpy as np

from phaseaware.errors import InputError
from phaseaware.tokenizers.base import TokenizedText
from phaseaware.tokenizers.offsets import CharIndex, char_starts_array, split_starts, utf8_bytes

if TYPE_CHECKING:
    import tiktoken

__all__ = ["TiktokenTokenizer"]


class TiktokenTokenizer:
    """A tiktoken encoding. Special-token strings in text are parsed (``allowed_special="all"``).

    tiktoken has no BOS token, so ``bos_text`` is ``""``; ``eos_text`` is ``<|endoftext|>``.
    """

    parallel_batch: bool = False  # tokenize_batch is sequential; one long call is faster

    def __init__(self, encoding: tiktoken.Encoding, *, spec: str) -> None:
        self._encoding = encoding
        self._spec = spec
        self._lock = threading.Lock()
        self._byte_lengths: np.ndarray | None = None
        self._fingerprint: str | None = None

    def __repr__(self) -> str:
        return f"TiktokenTokenizer(spec={self._spec!r})"

    @property
    def spec(self) -> str:
        return self._spec

    @property
    def bos_text(self) -> str:
        return ""

    @property
    def eos_text(self) -> str:
        return "<|endoftext|>" if "<|endoftext|>" in self._encoding.special_tokens_set else ""

    @property
    def chat_template(self) -> None:
        return None

    @property
    def encoding(self) -> tiktoken.Encoding:
        """The wrapped ``tiktoken.Encoding`` (read-only use)."""
        return self._encoding

    def encode(self, text: str) -> list[int]:
        return self._encoding.encode(text, allowed_special="all", disallowed_special=())

    def decode(self, ids: list[int]) -> str:
        return self._encoding.decode(list(ids), errors="replace")

    def tokenize(self, text: str) -> TokenizedText:
        """Ids and char starts; ids stay in numpy until the end (no per-token Python work).

        tiktoken is byte-level BPE, so its tokens always cover the text's bytes
        exactly; the check that their byte lengths sum to the text's length is the
        cheap guard that the offsets below are exact.
        """
        ids, starts = self._ids_and_starts(text)
        return TokenizedText(text=text, ids=tuple(ids.tolist()), starts=tuple(starts.tolist()))

    def char_index(self, text: str) -> CharIndex:
        """Token count and char → token lookups of ``text`` (as ``tokenize``, minus the tuples)."""
        return CharIndex(starts=self._ids_and_starts(text)[1], text_length=len(text))

    def _ids_and_starts(self, text: str) -> tuple[np.ndarray, np.ndarray]:
        text_bytes = utf8_bytes(text)
        ids = self._encode_array(text)
        lengths = self._lengths_table()[ids]
        if int(lengths.sum()) != len(text_bytes):
            raise InputError("tiktoken did not round-trip the text; it cannot be tokenized exactly")
        return ids, char_starts_array(text_bytes, lengths)

    def _encode_array(self, text: str) -> np.ndarray:
        """``encode(text)`` as a numpy array (skips building a Python list of ints)."""
        to_numpy = getattr(self._encoding, "encode_to_numpy", None)
        if to_numpy is None:  # tiktoken < 0.4
            return np.asarray(self.encode(text), dtype=np.int64)
        return to_numpy(text, allowed_special="all", disallowed_special=())

    def tokenize_batch(self, texts: Sequence[str]) -> list[TokenizedText]:
        """``[tokenize(t) for t in texts]``; offsets of all texts in one numpy pass.

        Encoding stays sequential: tiktoken's thread pool was slower than one
        thread for many short texts on the machines measured.
        """
        texts = list(texts)
        if len(texts) < 2:
            return [self.tokenize(t) for t in texts]
        texts_bytes = [utf8_bytes(t) for t in texts]
        ids_list = [self.encode(t) for t in texts]
        flat = list(itertools.chain.from_iterable(ids_list))
        if self._encoding.decode_bytes(flat) != b"".join(texts_bytes):
            raise InputError("tiktoken did not round-trip the text; it cannot be tokenized exactly")
        lengths = self._lengths_table()[np.asarray(flat, dtype=np.int64)]
        starts = split_starts(texts, texts_bytes, lengths, [len(ids) for ids in ids_list])
        if starts is None:
            return [self.tokenize(t) for t in texts]
        return [
            TokenizedText(text=t, ids=tuple(ids), starts=s)
            for t, ids, s in zip(texts, ids_list, starts, strict=True)
        ]

    def fingerprint(self) -> str:
        self._build_tables()
        assert self._fingerprint is not None
        return self._fingerprint

    def _lengths_table(self) -> np.ndarray:
        if self._byte_lengths is None:
            self._build_tables()
        assert self._byte_lengths is not None
        return self._byte_lengths

    def _build_tables(self) -> None:
        """Byte length per id (for offsets) and the vocabulary hash, in one pass."""
        with self._lock:
            if self._fingerprint is not None:
                return
            enc = self._encoding
            lengths = np.zeros(enc.n_vocab, dtype=np.int64)
            digest = hashlib.sha256(b"phaseaware-vocab-v1\0tiktoken\0")
            for token_id in range(enc.n_vocab):
                try:
                    token = enc.decode_single_token_bytes(token_id)
                except KeyError:
                    continue  # gaps in the id space (cl100k_base has some)
                lengths[token_id] = len(token)
                digest.update(b"%d:%d:" % (token_id, len(token)) + token)
            digest.update(b"\0special\0")
            specials = sorted((enc.encode_single_token(s), s) for s in enc.special_tokens_set)
            for token_id, text in specials:
                digest.update(f"{token_id}:{text}\n".encode())
            # the split regex changes tokenization as much as the vocabulary does
            digest.update(b"\0pattern\0" + getattr(enc, "_pat_str", "").encode())
            self._byte_lengths = lengths
            self._fingerprint = "sha256:" + digest.hexdigest()
