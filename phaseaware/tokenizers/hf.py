"""Adapter from a Hugging Face fast tokenizer to :class:`Tokenizer`.

A local folder with ``tokenizer.json`` loads through the Rust ``tokenizers``
library alone (``hf_files``: no transformers, no torch, ~0.1 s), unless
transformers would build a different backend from it; ``transformers`` is
imported only to load other targets (hub names, ``.gguf`` files) and, lazily,
to render a Jinja chat template (``render_chat``, ``hf_tokenizer``). Encoding goes
straight to the Rust ``tokenizers`` backend with ``add_special_tokens=False``
(BOS is part of the text by convention); added/special-token strings in the
text are parsed as those tokens.

Offsets: the backend's offset mapping is quirky for byte-level BPE (a token
``"Ġhello"`` reports the span of ``hello`` without its space; pieces of a split
character report the whole character). So for byte-level vocabularies each id
is mapped to the exact bytes it stands for, the concatenation is checked
against the text, and starts come from cumulative byte lengths. Other
vocabularies (or texts a normalizer changes) fall back to the offset mapping,
with gaps before a token assigned to that token.

Cold start: the fingerprint and the byte tables read the vocabulary by id
(``hf_vocab.vocab_by_id``; no ``get_vocab`` dict, no sort) where that is proven to
be the same vocabulary, and the byte tables convert only the ids a text encodes to.
"""

from __future__ import annotations

import threading
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import numpy as np

from phaseaware.errors import TemplateError, TokenizerError
from phaseaware.extras import missing_message
from phaseaware.tokenizers.base import TokenizedText
from phaseaware.tokenizers.cuts import CutRule
from phaseaware.tokenizers.hf_files import TokenizerFolder, read_tokenizer_folder
from phaseaware.tokenizers.hf_vocab import (
    ByteTable,
    build_byte_tables,
    byte_level_alphabet,
    fingerprint_of,
    fingerprint_text,
    vocab_by_id,
    vocab_fingerprint,
)
from phaseaware.tokenizers.hf_windowed import hf_window_rule
from phaseaware.tokenizers.offsets import utf8_bytes
from phaseaware.tokenizers.rank_bpe import RankTwin, TwinSlot, rank_twin
from phaseaware.tokenizers.windowing import WindowRecipe

__all__ = ["HFTokenizer", "load_hf_tokenizer", "byte_level_alphabet"]


class HFTokenizer:
    """A ``transformers`` fast tokenizer behind the phaseaware :class:`Tokenizer` protocol."""

    parallel_batch: bool = True  # tokenize_batch encodes in parallel (Rust threads)

    def __init__(self, tokenizer: Any, *, spec: str, bos_text: str | None = None) -> None:
        if not getattr(tokenizer, "is_fast", False):
            raise TokenizerError(
                f"{spec!r} loaded a slow (Python) tokenizer; phaseaware needs a fast one "
                "(a folder with tokenizer.json)"
            )
        self._init(tokenizer.backend_tokenizer, spec=spec)
        self._tok: Any = tokenizer
        self._folder: TokenizerFolder | None = None
        self._bos_text = _infer_bos_text(tokenizer) if bos_text is None else bos_text

    @classmethod
    def from_folder(
        cls, folder: TokenizerFolder, *, spec: str, bos_text: str | None = None
    ) -> HFTokenizer:
        """A tokenizer read by ``tokenizers`` alone; transformers loads only to render a
        chat template (``render_chat``) or when ``hf_tokenizer`` is asked for."""
        self = cls.__new__(cls)
        self._init(folder.backend, spec=spec)
        self._tok = None
        self._folder = folder
        self._bos_text = _folder_bos_text(folder) if bos_text is None else bos_text
        return self

    def _init(self, backend: Any, *, spec: str) -> None:
        self._backend = backend
        self._spec = spec
        self._lock = threading.Lock()
        self._tables: ByteTable | None | bool = False  # False: not looked at yet
        self._fingerprint: str | None = None
        self._by_id: list[str | None] | None | bool = False  # False: not read yet
        self._vocab: dict[str, int] | None = None
        self._special: frozenset[str] | None = None
        self._unknown: str | None = None
        self._window: tuple[str | None, CutRule | None] | None = None
        self._twins = TwinSlot(backend, self._new_twin)  # the rank-BPE engine, when built

    def __repr__(self) -> str:
        return f"HFTokenizer(spec={self._spec!r})"

    @property
    def backend(self) -> Any:
        """The Rust ``tokenizers.Tokenizer`` that encodes (read-only use)."""
        return self._backend

    @property
    def spec(self) -> str:
        return self._spec

    @property
    def bos_text(self) -> str:
        return self._bos_text

    @property
    def eos_text(self) -> str:
        if self._folder is not None:
            return self._folder.eos_token or ""
        return self._tok.eos_token or ""

    @property
    def chat_template(self) -> str | None:
        if self._folder is not None:
            return self._folder.chat_template
        template = getattr(self._tok, "chat_template", None)
        if isinstance(template, dict):  # named templates: the default one is the chat one
            template = template.get("default")
        return template or None

    @property
    def special_strings(self) -> frozenset[str]:
        """Every added-token string (special or not: both are matched whole in text).

        Read once (like the fingerprint, which covers the added tokens): a loaded
        tokenizer is not changed afterwards."""
        if self._special is None:
            added = self._backend.get_added_tokens_decoder().values()
            self._special = frozenset(
                str(t.content) for t in added if len(str(t.content).strip()) >= 2
            )
        return self._special

    @property
    def unknown_text(self) -> str:
        """The unknown token (out-of-vocabulary text encodes to it); "" if none. Read
        once (the backend builds a model wrapper on every access)."""
        if self._unknown is None:
            if self._tok is not None:
                self._unknown = str(self._tok.unk_token or "")
            else:  # tokenizers-only load: the model knows its unk token
                self._unknown = str(getattr(self._backend.model, "unk_token", None) or "")
        return self._unknown

    @property
    def hf_tokenizer(self) -> Any:
        """The ``transformers`` tokenizer of the same files (read-only use; loaded on first use)."""
        if self._tok is None:
            with self._lock:
                if self._tok is None and self._folder is not None:
                    self._tok = _auto_tokenizer(str(self._folder.folder), spec=self._spec)
        return self._tok

    def encode(self, text: str) -> list[int]:
        return self._twins.ids_batch([text])[0]

    def prepare_rank_engine(self) -> bool:
        """Build the rank-BPE twin now (:mod:`~phaseaware.tokenizers.rank_bpe`); True if any."""
        return self._twins.prepare()

    def _new_twin(self) -> RankTwin | None:
        tables = self._byte_tables()
        if tables is None:
            return None
        tables.fill(np.arange(tables.size, dtype=np.int64))
        return rank_twin(self._backend, tables.pieces)

    def decode(self, ids: list[int]) -> str:
        text: str = self._backend.decode(list(ids), skip_special_tokens=False)
        return text

    def tokenize(self, text: str) -> TokenizedText:
        return self.tokenize_batch([text])[0]

    def tokenize_batch(self, texts: Sequence[str]) -> list[TokenizedText]:
        """``[tokenize(t) for t in texts]``, encoded in parallel by the Rust backend.

        Byte-level vocabularies skip the backend's offset tracking (``encode_batch_fast``,
        about 2x faster) and take starts from exact byte lengths; a text whose bytes do
        not round-trip (a normalizer changed it) falls back to the offset mapping.
        """
        texts = list(texts)
        if self._byte_tables() is None:
            for t in texts:
                utf8_bytes(t)  # a lone surrogate is an InputError on every route
            return self._tokenize_with_offsets(texts)
        got = self._byte_level_batch(texts)
        if got is None:  # some text does not round-trip: fall back per text
            if len(texts) > 1:
                return [self.tokenize(t) for t in texts]
            return self._tokenize_with_offsets(texts)
        return [
            TokenizedText(text=t, ids=tuple(ids), starts=tuple(st.tolist()))
            for t, ids, st in zip(texts, *got, strict=True)
        ]

    def window_support(self) -> str | None:
        """None when windowed re-tokenization is sound (DeepSeek-V4's config only)."""
        return self._window_rule()[0]

    def window_recipe(self) -> WindowRecipe | None:
        rule = self._window_rule()[1]
        encode = lambda text: self.token_starts_batch([text])[0]  # noqa: E731
        return None if rule is None else WindowRecipe(rule, encode, bar_specials=False)

    def _window_rule(self) -> tuple[str | None, CutRule | None]:
        with self._lock:  # decided once per tokenizer object
            if self._window is None:
                self._window = hf_window_rule(self._backend)
            return self._window

    def token_starts_batch(self, texts: Sequence[str]) -> list[np.ndarray]:
        """``[tokenize(t).starts for t in texts]`` as int64 arrays, without the tuples
        (``tokenize_batch``'s byte-table route; ``tokenize_batch`` itself where that
        route does not apply)."""
        texts = list(texts)
        got = self._byte_level_batch(texts) if self._byte_tables() is not None else None
        if got is None:
            return [np.asarray(t.starts, dtype=np.int64) for t in self.tokenize_batch(texts)]
        return got[1]

    def _byte_level_batch(
        self, texts: list[str]
    ) -> tuple[list[list[int]], list[np.ndarray]] | None:
        """(ids, char starts) of each text from one ``encode_batch_fast`` and the byte
        table (which must exist); None where some text's tokens do not round-trip
        (:meth:`~phaseaware.tokenizers.hf_vocab.ByteTable.starts`)."""
        text_bytes = [utf8_bytes(t) for t in texts]
        table = self._byte_tables()
        assert table is not None
        ids_list = self._twins.ids_batch(texts)
        starts = table.starts(texts, text_bytes, ids_list)
        return None if starts is None else (ids_list, starts)

    def _tokenize_with_offsets(self, texts: list[str]) -> list[TokenizedText]:
        encodings = self._backend.encode_batch(texts, add_special_tokens=False)
        return [
            TokenizedText(text=t, ids=tuple(e.ids), starts=_starts_from_offsets(e.offsets))
            for t, e in zip(texts, encodings, strict=True)
        ]

    def render_chat(
        self,
        messages: Sequence[Mapping[str, Any]],
        *,
        add_generation_prompt: bool = True,
        **kwargs: Any,
    ) -> str:
        """The chat template applied to ``messages`` as text (nothing tokenized), as
        ``apply_chat_template`` renders it, within time and size limits
        (:mod:`phaseaware.tokenizers.hf_template`: ``TemplateLimitError``)."""
        if self.chat_template is None:
            raise TemplateError(
                f"tokenizer {self._spec!r} has no chat template; use chat_format "
                "(--chat-format) chatml, deepseek-v4 or none"
            )
        from phaseaware.tokenizers.hf_template import render_chat_template

        # transformers' apply_chat_template, in its sandbox with time and size limits
        return render_chat_template(
            self.chat_template,
            messages,
            name=self._spec,
            special_tokens=self.hf_tokenizer.special_tokens_map,
            add_generation_prompt=add_generation_prompt,
            **kwargs,
        )

    def fingerprint(self) -> str:
        """sha256 over ``(id, token string)`` of the whole vocabulary plus the added tokens
        (content and special flag); post-processing and chat template are not included."""
        with self._lock:
            if self._fingerprint is None:
                by_id = self._vocab_by_id()
                if by_id is not None:
                    self._fingerprint = fingerprint_of(self._backend, fingerprint_text(by_id))
                else:
                    self._fingerprint = vocab_fingerprint(self._backend, self._shared_vocab())
            return self._fingerprint

    def _vocab_by_id(self) -> list[str | None] | None:
        """:func:`~phaseaware.tokenizers.hf_vocab.vocab_by_id`, read once (caller holds
        ``_lock``): the fingerprint and the byte table both use it."""
        if self._by_id is False:
            self._by_id = vocab_by_id(self._backend)
        return self._by_id  # type: ignore[return-value]

    def _shared_vocab(self) -> dict[str, int]:
        """``get_vocab(with_added_tokens=True)`` once for the fingerprint and the byte tables
        where :meth:`_vocab_by_id` gives no list (caller holds ``_lock``)."""
        if self._vocab is None:
            self._vocab = self._backend.get_vocab(with_added_tokens=True)
        vocab = self._vocab
        if self._fingerprint is not None or self._tables is not False:
            self._vocab = None  # the second user: nobody needs it after this
        return vocab

    def _byte_tables(self) -> ByteTable | None:
        """The byte table of a byte-level vocabulary (filled lazily), else ``None``."""
        if self._tables is False:
            with self._lock:
                if self._tables is False:
                    self._tables = self._new_byte_table()
        return self._tables  # type: ignore[return-value]

    def _new_byte_table(self) -> ByteTable | None:
        if type(self._backend.decoder).__name__ != "ByteLevel":
            self._vocab = None  # not needed here: the fingerprint's copy can go
            return None
        by_id = self._vocab_by_id()
        if by_id is not None:
            added = frozenset(self._backend.get_added_tokens_decoder())
            return ByteTable(tokens=by_id, added=added)
        pieces, _ = build_byte_tables(self._backend, self._shared_vocab())
        return None if pieces is None else ByteTable(pieces=pieces)


def _infer_bos_text(tokenizer: Any) -> str:
    """The BOS string if this tokenizer's model expects one at position 0, else ``""``.

    Some tokenizers name a BOS token the model never sees first (SmolLM2 calls
    ``<|im_start|>`` its BOS), so BOS counts only if the tokenizer adds it itself
    or its chat template emits it.
    """
    bos = getattr(tokenizer, "bos_token", None)
    if not bos:
        return ""
    template = getattr(tokenizer, "chat_template", None) or ""
    if "bos_token" in str(template):
        return str(bos)
    added = tokenizer.backend_tokenizer.encode("a", add_special_tokens=True).ids
    return str(bos) if added and added[0] == tokenizer.bos_token_id else ""


def _folder_bos_text(folder: TokenizerFolder) -> str:
    """:func:`_infer_bos_text` for a folder read by ``tokenizers`` alone."""
    bos = folder.bos_token
    if not bos:
        return ""
    if "bos_token" in (folder.chat_template or ""):
        return bos
    added = folder.backend.encode("a", add_special_tokens=True).ids
    return bos if added and added[0] == folder.backend.token_to_id(bos) else ""


def _starts_from_offsets(offsets: Sequence[tuple[int, int]]) -> tuple[int, ...]:
    """Starts from a backend offset mapping; characters no token claims go to the next token."""
    starts: list[int] = []
    covered = 0  # end of the text claimed so far
    for begin, end in offsets:
        start = min(begin, covered)
        if starts:
            start = max(start, starts[-1])
        starts.append(start)
        covered = max(covered, end)
    return tuple(starts)


def load_hf_tokenizer(target: str, *, spec: str, bos_text: str | None = None) -> HFTokenizer:
    """Load a local tokenizer folder, a cached hub name, or the tokenizer inside a ``.gguf``.

    A folder with ``tokenizer.json`` loads through ``tokenizers`` alone
    (:func:`~phaseaware.tokenizers.hf_files.read_tokenizer_folder`) when that
    gives what transformers would; everything else goes through transformers.
    """
    path = Path(target).expanduser()
    if path.is_dir() and path.suffix.lower() != ".gguf":
        folder = read_tokenizer_folder(path)
        if folder is not None:
            return HFTokenizer.from_folder(folder, spec=spec, bos_text=bos_text)
    return HFTokenizer(_auto_tokenizer(target, spec=spec), spec=spec, bos_text=bos_text)


def _auto_tokenizer(target: str, *, spec: str) -> Any:
    """``transformers.AutoTokenizer`` on local files only; errors name the fix."""
    try:
        from transformers import AutoTokenizer
    except ImportError:
        raise TokenizerError(missing_message("transformers", what=repr(spec))) from None
    from transformers.utils import logging as hf_logging

    path = Path(target).expanduser()
    verbosity = hf_logging.get_verbosity()
    # A tokenizer folder's config.json names a model type transformers may not know
    # (the reference model's): its "instantiate a model of type" warning is noise here.
    hf_logging.set_verbosity_error()  # type: ignore[no-untyped-call]
    try:
        if path.suffix.lower() == ".gguf":
            if not path.is_file():
                raise TokenizerError(
                    f"GGUF file {str(path)!r} not found; check the path in {spec!r}"
                )
            return AutoTokenizer.from_pretrained(
                str(path.parent), gguf_file=path.name, local_files_only=True
            )
        return AutoTokenizer.from_pretrained(
            str(path) if path.exists() else target, local_files_only=True
        )
    except TokenizerError:
        raise
    except Exception as exc:  # transformers/tokenizers raise many unrelated types here
        reason = (str(exc).strip().splitlines() or [type(exc).__name__])[0]
        raise TokenizerError(
            f"cannot load Hugging Face tokenizer {target!r} from local files ({reason}); "
            "pass a local folder holding tokenizer.json (--tokenizer hf:/path/to/folder); "
            "phaseaware never downloads tokenizers"
        ) from exc
    finally:
        hf_logging.set_verbosity(verbosity)
