"""A Hugging Face ``tokenizers`` vocabulary read by id: fingerprint and byte tables, cheaply.

``Tokenizer.get_vocab(with_added_tokens=True)`` builds a Python dict of the whole
vocabulary (about 0.15 s for DeepSeek-V4's 129K tokens) which then has to be sorted
by id. :func:`vocab_by_id` reads the same entries already in id order with
``id_to_token`` (half the time, no sort) wherever that is provably the same list;
:func:`fingerprint_text` and :class:`ByteTable` are built from it, the byte table
lazily: only the ids a text encodes to are converted.

Why the id list equals ``get_vocab(True)`` (sorted by id) when :func:`vocab_by_id`
returns one. ``get_vocab(True)`` is the model's vocab ``V`` (token -> id), updated
with the added vocabulary's map ``A`` (content -> id; added entries win), and
``Tokenizer.id_to_token(i)`` is ``A⁻¹[i]`` (``get_added_tokens_decoder``) if ``i``
is added, else the model's ``V⁻¹[i]``. For the models accepted (``BPE``,
``WordLevel``, ``WordPiece``: ``V`` a hash map, ``V⁻¹`` its inversion, and
``get_vocab_size(False) == len(V)``) the checks are:

1. the number of ids in ``[0, size)`` the model knows equals ``len(V)``: ``V⁻¹`` then has
   ``len(V)`` entries, so ``V`` is injective and all its ids lie below ``size``; and the
   model's ids are exactly ``0 .. len(V) - 1`` (ids from ``len(V)`` on are added ones).
2. every added ``(id a, content c)`` has ``token_to_id(c) == a``, the model's id of ``c``
   absent or ``a``, and the model's token at ``a`` absent or ``c``: the update neither
   moves a model token to another id nor puts a second token on an id.

``A`` and ``A⁻¹`` are kept in step by ``tokenizers`` (``AddedVocabulary`` inserts each
token into both; a new token takes a fresh id above ``len(V)``, which check 1 keeps
clear of model ids). So ``get_vocab(True)`` holds exactly the pairs ``(token, i)`` with
``token = id_to_token(i)`` not ``None``, one per id: the list of those pairs by id is
the one the slow path sorts. Anything else (another model type, a failed check)
returns ``None`` and the caller takes ``get_vocab``. ``tests/unit/tokenizers/test_tokenizer_cold_start.py``
checks the equality on random tokenizers (duplicate ids, holes, added tokens over
model tokens) with hypothesis.
"""

from __future__ import annotations

import hashlib
import itertools
import operator
import threading
from collections.abc import Sequence
from typing import Any

import numpy as np

from phaseaware.tokenizers.offsets import split_start_arrays

__all__ = [
    "ByteTable",
    "build_byte_tables",
    "byte_level_alphabet",
    "byte_level_table",
    "fingerprint_of",
    "fingerprint_text",
    "vocab_by_id",
    "vocab_fingerprint",
]

#: Model types whose vocabulary is one hash map and its inversion (see module docstring).
_MAP_MODELS = frozenset({"BPE", "WordLevel", "WordPiece"})


def vocab_by_id(backend: Any) -> list[str | None] | None:
    """``id_to_token(i)`` for each id ``i`` below the vocabulary's end, or ``None`` where
    that is not provably the content of ``get_vocab(True)`` (module docstring)."""
    if type(backend.model).__name__ not in _MAP_MODELS:
        return None
    model = backend.model
    added = {i: str(t.content) for i, t in backend.get_added_tokens_decoder().items()}
    model_size = int(backend.get_vocab_size(with_added_tokens=False))
    size = max(int(backend.get_vocab_size(with_added_tokens=True)), max(added, default=-1) + 1)
    tokens: list[str | None] = list(map(backend.id_to_token, range(size)))
    model_at_added = 0
    for token_id, content in added.items():
        at = model.id_to_token(token_id)
        if at is not None:
            model_at_added += 1
        if (
            (at is not None and token_id >= model_size)  # check 1: a model id past len(V)
            or tokens[token_id] != content
            or at not in (None, content)
            or backend.token_to_id(content) != token_id
            or model.token_to_id(content) not in (None, token_id)
        ):
            return None
    known = size - tokens.count(None)  # ids with a token: model ids not added, plus added
    if known - len(added) + model_at_added != model_size:
        return None  # check 1: some model id lies at or beyond ``size``, or V is not injective
    if any(tokens[i] is not None and i not in added for i in range(model_size, size)):
        return None  # check 1: model ids not exactly 0 .. len(V) - 1
    while tokens and tokens[-1] is None:
        tokens.pop()
    return tokens


def fingerprint_text(tokens: list[str | None]) -> str:
    """``"{id}\\0{token}\\n"`` for each id with a token, in id order: the text the slow
    path builds from ``get_vocab(True)`` sorted by id."""
    return "".join([f"{i}\0{t}\n" for i, t in enumerate(tokens) if t is not None])


def byte_level_alphabet() -> dict[str, int]:
    """GPT-2's printable stand-in character for each byte, inverted: ``{char: byte}``."""
    printable = [*range(ord("!"), ord("~") + 1), *range(0xA1, 0xAD), *range(0xAE, 0x100)]
    chars = list(printable)
    extra = 0
    for byte in range(256):
        if byte not in printable:
            printable.append(byte)
            chars.append(256 + extra)
            extra += 1
    return {chr(c): b for b, c in zip(printable, chars, strict=True)}


def byte_level_table() -> dict[int, int]:
    """``str.translate`` table: each byte-level stand-in character -> the code point of its
    byte (0..255); every other character below 256 -> U+FFFF, so that ``encode("latin-1")``
    fails exactly where a token is not byte-level text (as a lookup in the alphabet would)."""
    table = {ord(c): b for c, b in byte_level_alphabet().items()}
    for code in range(256):
        table.setdefault(code, 0xFFFF)
    return table


def token_bytes(token: str, table: dict[int, int]) -> bytes:
    """The bytes a byte-level vocabulary token stands for (its ByteLevel decoding)."""
    try:  # byte-level text: each stand-in character -> its byte (C speed)
        return token.translate(table).encode("latin-1")
    except UnicodeEncodeError:  # not byte-level text: the ByteLevel decoder keeps it
        return token.encode("utf-8")


class ByteTable:
    """Exact bytes per token id of a byte-level vocabulary, converted on first use.

    ``pieces[i]`` and ``lengths[i]`` are valid for every id passed to :meth:`fill`
    (or for all ids when built with ``pieces``); ids at or beyond ``size`` have none.
    A filled entry equals the one the eager table of ``get_vocab(True)`` holds: an
    added token's UTF-8 content, else :func:`token_bytes` of its token, else ``b""``.
    """

    def __init__(
        self,
        *,
        tokens: list[str | None] | None = None,
        added: frozenset[int] = frozenset(),
        pieces: list[bytes] | None = None,
    ) -> None:
        self._lock = threading.Lock()
        self._table = byte_level_table()
        self._tokens = tokens
        self._added = added
        if pieces is not None:  # eager: everything filled
            self.size = len(pieces)
            self.pieces: list[bytes | None] = list(pieces)
            self.lengths = np.fromiter(map(len, pieces), dtype=np.int64, count=self.size)
            self._filled = np.ones(self.size, dtype=bool)
        else:
            self.size = len(tokens or ())
            self.pieces = [None] * self.size
            self.lengths = np.zeros(self.size, dtype=np.int64)
            self._filled = np.zeros(self.size, dtype=bool)

    def fill(self, ids: np.ndarray) -> None:
        """Convert the ids in ``ids`` (all ``< size``) that are not converted yet."""
        missing = ids[~self._filled[ids]]
        if missing.size == 0:
            return
        with self._lock:
            tokens = self._tokens or []
            for token_id in np.unique(missing).tolist():
                token = tokens[token_id]
                if token is None:
                    piece = b""
                elif token_id in self._added:
                    piece = token.encode("utf-8")
                else:
                    piece = token_bytes(token, self._table)
                self.pieces[token_id] = piece
                self.lengths[token_id] = len(piece)
                self._filled[token_id] = True  # last: a reader seeing True sees the piece

    def starts(
        self, texts: Sequence[str], texts_bytes: Sequence[bytes], ids_list: Sequence[list[int]]
    ) -> list[np.ndarray] | None:
        """Each text's token char starts from its ids (``ids_list[k]`` of ``texts[k]``);
        None where the tokens do not round-trip: the pieces of all the ids, joined in
        order, must equal the texts' bytes joined, and each text's tokens must cover
        exactly its own bytes (``split_start_arrays``), so every text's tokens spell
        exactly its bytes and each token starts where its cumulative byte length says."""
        counts = [len(ids) for ids in ids_list]
        n = sum(counts)
        flat = itertools.chain.from_iterable
        flat_ids = np.fromiter(flat(ids_list), dtype=np.int64, count=n)
        if n and int(flat_ids.max()) >= self.size:
            return None
        self.fill(flat_ids)  # every piece of these ids is bytes from here on
        if n > 1:
            got = operator.itemgetter(*flat(ids_list))(self.pieces)
        else:  # itemgetter of one id gives the piece itself (of none, an error)
            got = [self.pieces[i] for i in flat(ids_list)]
        if b"".join(got) != (texts_bytes[0] if len(texts) == 1 else b"".join(texts_bytes)):
            return None
        return split_start_arrays(texts, texts_bytes, self.lengths[flat_ids], counts)


def vocab_fingerprint(backend: Any, vocab: dict[str, int] | None = None) -> str:
    """sha256 over ``"{id}\\0{token}\\n"`` per vocabulary entry (by id, then token), then
    the added tokens; the entries are joined and hashed in one update (same bytes)."""
    if vocab is None:
        vocab = backend.get_vocab(with_added_tokens=True)
    if len(set(vocab.values())) == len(vocab):  # ids unique: sorting by id alone is the same
        entries = sorted(vocab.items(), key=operator.itemgetter(1))
    else:
        entries = sorted(vocab.items(), key=lambda kv: (kv[1], kv[0]))
    text = "".join(itertools.starmap("{1}\0{0}\n".format, entries))
    return fingerprint_of(backend, text)


def fingerprint_of(backend: Any, vocab_text: str) -> str:
    """The fingerprint from the vocabulary's ``"{id}\\0{token}\\n"`` text and the added
    tokens."""
    digest = hashlib.sha256(b"phaseaware-vocab-v1\0hf\0")
    digest.update(vocab_text.encode("utf-8", "surrogatepass"))
    digest.update(b"\0added\0")
    for token_id, token in sorted(backend.get_added_tokens_decoder().items()):
        digest.update(f"{token_id}\0{token.content}\0{int(token.special)}\n".encode())
    return "sha256:" + digest.hexdigest()


def build_byte_tables(
    backend: Any, vocab: dict[str, int] | None = None
) -> tuple[list[bytes] | None, np.ndarray | None]:
    """Exact bytes per id for byte-level BPE vocabularies; ``(None, None)`` for others.

    ``vocab``: ``backend.get_vocab(with_added_tokens=True)`` when the caller has it."""
    if type(backend.decoder).__name__ != "ByteLevel":
        return None, None
    table = byte_level_table()
    if vocab is None:
        vocab = backend.get_vocab(with_added_tokens=True)
    added = {i: t.content for i, t in backend.get_added_tokens_decoder().items()}
    size = max([*vocab.values(), *added.keys()], default=-1) + 1
    pieces = [b""] * size
    for token, token_id in vocab.items():
        pieces[token_id] = token_bytes(token, table)
    for token_id, content in added.items():
        pieces[token_id] = content.encode("utf-8")
    lengths = np.fromiter(map(len, pieces), dtype=np.int64, count=size)
    return pieces, lengths
