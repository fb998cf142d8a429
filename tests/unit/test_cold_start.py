"""Cold start of ``phaseaware assemble``: what the example imports, and the id-ordered
vocabulary read (``hf_vocab``) that replaces ``get_vocab`` for the fingerprint and the
byte tables, proven equal to the ``get_vocab`` path on random tokenizers (hypothesis)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
from hypothesis import HealthCheck, assume, example, given, settings
from hypothesis import strategies as st

from phaseaware.tokenizers import load_tokenizer
from phaseaware.tokenizers.hf import HFTokenizer
from phaseaware.tokenizers.hf_files import TokenizerFolder
from phaseaware.tokenizers.hf_vocab import ByteTable, build_byte_tables, vocab_by_id
from tests.support.fingerprint_reference import slow_fingerprint

tokenizers = pytest.importorskip("tokenizers")

ROOT = Path(__file__).resolve().parents[2]
BUILTIN = ROOT / "phaseaware" / "profiles" / "builtin" / "deepseek-v4-flash-base.json"
#: The reference tokenizer's fingerprint as the get_vocab path computed it before hf_vocab.
REFERENCE_FINGERPRINT = "sha256:b721d64cc414ae048371d209427a7b406f9dfb1810a25109f55a447b69789a1f"
HEAVY = ("torch", "transformers", "jinja2", "langchain", "langchain_core", "openai", "httpx",
         "uvicorn", "llama_index", "tiktoken")  # fmt: skip


def test_assemble_example_imports_nothing_heavy() -> None:
    """``python -m phaseaware assemble examples/request.json``, as a user runs it."""
    code = (
        "import runpy, sys, contextlib, io\n"
        "sys.argv = ['phaseaware', 'assemble', 'examples/request.json']\n"
        "with contextlib.redirect_stdout(io.StringIO()):\n"
        "    try:\n"
        "        runpy.run_module('phaseaware', run_name='__main__')\n"
        "    except SystemExit as exc:\n"
        "        assert exc.code == 0, exc.code\n"
        f"print(','.join(m for m in {HEAVY!r} if m in sys.modules))"
    )
    done = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, check=True, cwd=ROOT
    )
    assert done.stdout.strip().splitlines()[-1:] in ([], [""])


def test_deepseek_v4_fingerprint_is_the_builtin_profiles_and_read_by_id() -> None:
    expected = json.loads(BUILTIN.read_text(encoding="utf-8"))["tokenizer"]["fingerprint"]
    tokenizer = load_tokenizer("deepseek-v4")
    assert isinstance(tokenizer, HFTokenizer)
    assert vocab_by_id(tokenizer.backend) is not None  # the fast path is the one taken
    assert tokenizer.fingerprint() == expected == slow_fingerprint(tokenizer.backend)


def test_reference_fingerprint_unchanged_and_read_by_id() -> None:
    tokenizer = load_tokenizer("reference")
    assert isinstance(tokenizer, HFTokenizer)
    assert vocab_by_id(tokenizer.backend) is not None
    assert tokenizer.fingerprint() == REFERENCE_FINGERPRINT == slow_fingerprint(tokenizer.backend)


def test_deepseek_v4_lazy_byte_table_equals_the_eager_one() -> None:
    tokenizer = load_tokenizer("deepseek-v4")
    assert isinstance(tokenizer, HFTokenizer)
    _assert_tables_equal(tokenizer.backend)


def _assert_tables_equal(backend) -> None:
    eager, lengths = build_byte_tables(backend)
    by_id = vocab_by_id(backend)
    if eager is None or by_id is None:
        return
    table = ByteTable(tokens=by_id, added=frozenset(backend.get_added_tokens_decoder()))
    assert table.size == len(eager)
    ids = np.arange(table.size, dtype=np.int64)
    table.fill(ids[::2])  # in two rounds: a second fill converts only what is missing
    table.fill(ids)
    assert table.pieces == eager
    assert lengths is not None and table.lengths.tolist() == lengths.tolist()


# Random tokenizers: tokens over byte-level stand-ins, plain and non-byte-level text (CJK,
# quotes and backslashes that JSON escapes, a newline); ids from a small range so that
# duplicate ids, holes and added tokens over model tokens (same or other id) are common.
TOKEN = st.text(alphabet='abĠĊé日<>|\\"\n ', min_size=1, max_size=4)
DENSE = st.lists(TOKEN, unique=True, max_size=20).map(lambda ts: {t: i for i, t in enumerate(ts)})
VOCAB = st.one_of(st.dictionaries(TOKEN, st.integers(0, 30), max_size=20), DENSE)
ADDED = st.lists(st.tuples(TOKEN, st.integers(0, 35), st.booleans()), max_size=6)
MODELS = st.sampled_from(["BPE", "WordLevel", "WordPiece", "Unigram"])


def _tokenizer_json(model: str, vocab: dict[str, int], added, byte_level: bool) -> str:
    if model == "BPE":
        spec = {"type": "BPE", "dropout": None, "unk_token": None, "fuse_unk": False,
                "continuing_subword_prefix": None, "end_of_word_suffix": None,
                "byte_fallback": False, "vocab": vocab, "merges": []}  # fmt: skip
    elif model == "WordLevel":
        spec = {"type": "WordLevel", "vocab": vocab, "unk_token": "<unk>"}
    elif model == "WordPiece":
        spec = {"type": "WordPiece", "unk_token": "<unk>", "continuing_subword_prefix": "##",
                "max_input_chars_per_word": 100, "vocab": vocab}  # fmt: skip
    else:
        spec = {"type": "Unigram", "unk_id": None, "byte_fallback": False,
                "vocab": [[t, -1.0] for t in sorted(vocab, key=vocab.__getitem__)]}  # fmt: skip
    byte = {"type": "ByteLevel", "add_prefix_space": False, "trim_offsets": True,
            "use_regex": True}  # fmt: skip
    return json.dumps({
        "version": "1.0", "truncation": None, "padding": None,
        "added_tokens": [
            {"id": i, "content": c, "single_word": False, "lstrip": False, "rstrip": False,
             "normalized": False, "special": s}
            for c, i, s in added
        ],
        "normalizer": None, "pre_tokenizer": byte if byte_level else None,
        "post_processor": None, "decoder": byte if byte_level else None, "model": spec,
    })  # fmt: skip


def _load(text: str):
    try:
        return tokenizers.Tokenizer.from_str(text)
    except Exception:  # a spec tokenizers refuses: nothing to compare
        return None


@settings(max_examples=400, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(model=MODELS, vocab=VOCAB, added=ADDED, byte_level=st.booleans())
@example(model="BPE", vocab={"a": 0, "b": 0}, added=[], byte_level=True)  # duplicate id
@example(model="BPE", vocab={"a": 0, "b": 5}, added=[], byte_level=True)  # holes
@example(model="BPE", vocab={"a": 0, "b": 1}, added=[("a", 1, True)], byte_level=True)
@example(model="WordLevel", vocab={"a": 0, "b": 1}, added=[("c", 1, False)], byte_level=False)
@example(model="BPE", vocab={"a": 0, "b": 1}, added=[("c", 9, True), ("d", 2, False)],
         byte_level=True)  # fmt: skip
def test_id_ordered_read_equals_get_vocab(model, vocab, added, byte_level) -> None:
    backend = _load(_tokenizer_json(model, vocab, added, byte_level))
    assume(backend is not None)
    folder = TokenizerFolder(
        folder=Path("."), backend=backend, bos_token=None, eos_token=None, chat_template=None
    )
    fast = HFTokenizer.from_folder(folder, spec="test:random", bos_text="")
    assert fast.fingerprint() == slow_fingerprint(backend)
    _assert_tables_equal(backend)
    by_id = vocab_by_id(backend)
    if by_id is not None:  # the list is get_vocab(True), by id
        entries = sorted((i, t) for t, i in backend.get_vocab(with_added_tokens=True).items())
        assert [(i, t) for i, t in enumerate(by_id) if t is not None] == entries


def test_duplicate_model_ids_take_the_get_vocab_path() -> None:
    backend = _load(_tokenizer_json("BPE", {"a": 0, "b": 0, "c": 1}, [], True))
    assert backend is not None and vocab_by_id(backend) is None


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    vocab=st.dictionaries(st.sampled_from(sorted("abcdĠĊé")), st.integers(0, 8), min_size=1),
    added=ADDED,
    texts=st.lists(st.text(alphabet="abcd é\n<>|日", max_size=12), min_size=1, max_size=4),
)
def test_lazy_byte_table_tokenizes_as_the_eager_one(vocab, added, texts) -> None:
    backend = _load(_tokenizer_json("BPE", vocab, added, True))
    assume(backend is not None)
    folder = TokenizerFolder(
        folder=Path("."), backend=backend, bos_token=None, eos_token=None, chat_template=None
    )
    lazy = HFTokenizer.from_folder(folder, spec="test:lazy", bos_text="")
    eager = HFTokenizer.from_folder(folder, spec="test:eager", bos_text="")
    pieces, _ = build_byte_tables(backend)
    eager._tables = None if pieces is None else ByteTable(pieces=pieces)
    assert lazy.tokenize_batch(texts) == eager.tokenize_batch(texts)
    assert [lazy.tokenize(t) for t in texts] == [eager.tokenize(t) for t in texts]
