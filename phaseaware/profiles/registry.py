"""Find profiles by model name: built-ins, a user folder and extra folders from the environment.

Search path, highest precedence first (a name found earlier shadows later ones):

1. every folder in ``$PHASEAWARE_PROFILE_PATH`` (``os.pathsep``-separated, in order);
2. the user folder ``user_profile_dir()``: ``$PHASEAWARE_HOME/profiles`` when
   ``PHASEAWARE_HOME`` is set, else ``$XDG_CONFIG_HOME/phaseaware/profiles``,
   else ``~/.config/phaseaware/profiles``;
3. the built-in published profiles shipped in ``phaseaware/profiles/builtin/``.

A profile's registry *name* is its file name without ``.json``
(``deepseek-v4-flash-base.json`` -> ``deepseek-v4-flash-base``). Lookups
normalise names (case-insensitive, an ``org/`` prefix dropped, ``_`` and spaces
read as ``-``), try an exact match, then the longest registered name that is a
prefix of the query ending at a word boundary
(``deepseek-v4-flash-base-fp8`` -> ``deepseek-v4-flash-base``).

Nothing is read at import time; folders are listed on each lookup and parsed
profiles are cached by (path, modification time, size).
"""

from __future__ import annotations

import os
import re
import warnings
from dataclasses import dataclass, replace
from pathlib import Path
from typing import TYPE_CHECKING, Literal

from phaseaware.caches import BoundedCache
from phaseaware.errors import (
    FingerprintMismatchError,
    PeriodMismatchError,
    PhaseawareWarning,
    ProfileError,
    ProfileNotFoundError,
)
from phaseaware.profiles.aliases import resolve_alias
from phaseaware.profiles.io import load_profile, save_profile
from phaseaware.profiles.model import Profile
from phaseaware.profiles.trust import check_trusted
from phaseaware.userfiles import read_user_bytes

if TYPE_CHECKING:
    from phaseaware.tokenizers.base import Tokenizer

__all__ = [
    "ENV_HOME",
    "ENV_PROFILE_PATH",
    "ProfileEntry",
    "builtin_profile_dir",
    "check_period",
    "check_tokenizer",
    "find_profile",
    "get_profile",
    "list_profiles",
    "normalize_model_name",
    "profile_filename",
    "profile_path",
    "save_user_profile",
    "search_path",
    "user_profile_dir",
]

ENV_HOME = "PHASEAWARE_HOME"
ENV_PROFILE_PATH = "PHASEAWARE_PROFILE_PATH"

Origin = Literal["env", "user", "builtin"]

_CACHE_ENTRIES = 256
# loaded profiles by (file, mtime, size): a file rewritten many times evicts its old entries
_CACHE: BoundedCache[tuple[str, int, int], Profile] = BoundedCache(
    max_entries=_CACHE_ENTRIES, name="profiles.loaded"
)


@dataclass(frozen=True)
class ProfileEntry:
    """A profile file on the search path. ``name`` is the registry name (file stem).

    ``shadows``: the built-in profile this one hides (set by ``find_profile`` for a
    ``$PHASEAWARE_PROFILE_PATH`` profile named like a built-in, with a warning).
    """

    name: str
    path: Path
    origin: Origin
    shadows: Path | None = None


def builtin_profile_dir() -> Path:
    """Folder of the built-in published profiles (package data)."""
    return Path(__file__).resolve().parent / "builtin"


def user_profile_dir() -> Path:
    """The user's profile folder (may not exist yet); see the module docstring."""
    home = os.environ.get(ENV_HOME)
    if home:
        return Path(home).expanduser() / "profiles"
    config = os.environ.get("XDG_CONFIG_HOME")
    base = Path(config).expanduser() if config else Path.home() / ".config"
    return base / "phaseaware" / "profiles"


def search_path() -> list[tuple[Path, Origin]]:
    """Folders searched, highest precedence first (missing folders included)."""
    folders: list[tuple[Path, Origin]] = [
        (Path(part).expanduser(), "env")
        for part in os.environ.get(ENV_PROFILE_PATH, "").split(os.pathsep)
        if part.strip()
    ]
    folders.append((user_profile_dir(), "user"))
    folders.append((builtin_profile_dir(), "builtin"))
    return folders


def normalize_model_name(name: str) -> str:
    """Lookup key of a model name: lower case, ``org/`` dropped, ``_``/spaces -> ``-``.

    ``"deepseek-ai/DeepSeek-V4-Flash-Base"`` -> ``"deepseek-v4-flash-base"``.
    """
    stem = name.strip().rstrip("/").rsplit("/", 1)[-1]
    return re.sub(r"[\s_]+", "-", stem.lower())


def profile_filename(model: str) -> str:
    """A safe file name for ``model``'s profile (``<normalised name>.json``)."""
    stem = re.sub(r"[^a-z0-9.+-]+", "-", normalize_model_name(model)).strip("-.")
    if not stem:
        raise ProfileNotFoundError(f"cannot derive a profile file name from model {model!r}")
    return f"{stem}.json"


def _scan(folder: Path, origin: Origin) -> list[ProfileEntry]:
    try:
        files = sorted(p for p in folder.iterdir() if p.suffix == ".json")
    except OSError:  # missing or unreadable folder: nothing registered there
        return []
    return [ProfileEntry(p.stem, p, origin) for p in files if not p.name.startswith(".")]


def list_profiles(*, include_shadowed: bool = False) -> list[ProfileEntry]:
    """Registered profiles sorted by name; shadowed ones only if ``include_shadowed``.

    Lists files only; nothing is parsed (an invalid file fails when loaded).
    """
    seen: set[str] = set()
    entries: list[ProfileEntry] = []
    for folder, origin in search_path():
        for entry in _scan(folder, origin):
            key = normalize_model_name(entry.name)
            if key in seen and not include_shadowed:
                continue
            seen.add(key)
            entries.append(entry)
    return sorted(entries, key=lambda e: normalize_model_name(e.name))


def _boundary_prefix(name: str, query: str) -> bool:
    return query.startswith(name) and (len(query) == len(name) or not query[len(name)].isalnum())


def find_profile(name: str) -> ProfileEntry:
    """The entry registered for model ``name``: exact, then a hosted alias's checkpoint
    (:mod:`phaseaware.profiles.aliases`; warned, never silent), then longest prefix match."""
    entries = list_profiles()
    query = normalize_model_name(name)
    by_key = {normalize_model_name(e.name): e for e in entries}
    if query in by_key:
        return _report_shadowing(by_key[query])
    alias = resolve_alias(query)
    if alias is not None and alias.checkpoint in by_key:
        warnings.warn(alias.describe(), PhaseawareWarning, stacklevel=3)
        return _report_shadowing(by_key[alias.checkpoint])
    prefixes = [key for key in by_key if key and _boundary_prefix(key, query)]
    if prefixes:
        return _report_shadowing(by_key[max(prefixes, key=len)])
    known = ", ".join(e.name for e in entries) or "(none)"
    raise ProfileNotFoundError(
        f"no profile for model {name!r}; run `phaseaware calibrate --model {name}` to measure "
        f"one, or pass a profile file path (known profiles: {known})"
    )


def _report_shadowing(entry: ProfileEntry) -> ProfileEntry:
    """``entry``, with ``shadows`` set and a ``PhaseawareWarning`` when a profile from
    ``$PHASEAWARE_PROFILE_PATH`` or the user folder hides a built-in whose name normalises
    the same (``DeepSeek_V4 Flash-Base.json`` too): its expected accuracies replace the
    published ones, so it is never silent."""
    if entry.origin == "builtin":
        return entry
    key = normalize_model_name(entry.name)
    hidden = [
        e for e in _scan(builtin_profile_dir(), "builtin") if normalize_model_name(e.name) == key
    ]
    if not hidden:
        return entry
    check_trusted(entry.path)  # an untrusted file is refused, not announced
    where = f"${ENV_PROFILE_PATH}" if entry.origin == "env" else "the user profile folder"
    warnings.warn(
        f"profile {entry.name!r} from {where} ({entry.path}) shadows the "
        f"built-in profile of that name ({hidden[0].path}); remove it from "
        f"{where} to use the built-in",
        PhaseawareWarning,
        stacklevel=3,
    )
    return replace(entry, shadows=hidden[0].path)


def _looks_like_path(text: str) -> bool:
    # Not "contains a slash": "deepseek-ai/DeepSeek-V4-Flash-Base" is a model name.
    starts = ("./", "../", "~", "/", "." + os.sep, ".." + os.sep, os.sep)
    return text.lower().endswith(".json") or text.startswith(starts) or os.path.isabs(text)


def get_profile(name_or_path: str | os.PathLike[str]) -> Profile:
    """Load a profile from a file path, or look it up by model name.

    A path is a ``PathLike`` or a string written as one: ending in ``.json``, or starting
    with ``./``, ``../``, ``~`` or the root. Any other string
    (``"deepseek-ai/DeepSeek-V4-Flash-Base"``, ``"deepseek-v4-flash-base"``) is looked up
    in the registry only, never as a file in the current folder (a cloned repository could
    plant one there).
    """
    return _load_cached(profile_path(name_or_path))


def profile_path(name_or_path: str | os.PathLike[str]) -> Path:
    """The file ``get_profile(name_or_path)`` reads: the path as given, or the registered
    file for a model name (``ProfileNotFoundError`` when there is none)."""
    text = os.fspath(name_or_path)
    if text.endswith(".jsonl"):  # a calibration or compare log is not a profile
        stem = Path(text).name.removesuffix(".jsonl").removesuffix(".calibration")
        raise ProfileNotFoundError(
            f"{text} is a log (JSONL), not a profile: pass the profile file calibrate wrote "
            f"next to its log ({stem}.json; calibrate prints its path), or finish the "
            f"calibration with `phaseaware calibrate ... --log {text}`"
        )
    if isinstance(name_or_path, str) and not _looks_like_path(text):
        return find_profile(text).path
    candidate = Path(text).expanduser()
    if candidate.is_file():
        return candidate
    if os.path.lexists(candidate):
        # a folder, FIFO, device or symlink loop: say which (raises ProfileError)
        read_user_bytes(candidate, what="profile file", error=ProfileError)
    raise ProfileNotFoundError(
        f"profile file {text} does not exist; check the path, or pass a model name "
        "(see `phaseaware profile list`)"
    )


def _load_cached(path: Path) -> Profile:
    resolved = path.resolve()
    if resolved.parent != builtin_profile_dir():  # built-ins are trusted as the code is
        check_trusted(path)
    stat = resolved.stat()
    key = (str(resolved), stat.st_mtime_ns, stat.st_size)
    cached = _CACHE.get(key)
    if cached is not None:
        return cached
    profile = load_profile(resolved)
    _CACHE.put(key, profile)
    return profile


def save_user_profile(
    profile: Profile, *, directory: str | os.PathLike[str] | None = None, overwrite: bool = False
) -> Path:
    """Save ``profile`` as ``<directory>/<profile_filename(model)>`` (default: user folder).

    Creates the folder if needed; refuses to replace an existing file unless
    ``overwrite`` (raises ``FileExistsError``). The write is atomic.
    """
    folder = Path(directory).expanduser() if directory is not None else user_profile_dir()
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / profile_filename(profile.model)
    if path.exists() and not overwrite:
        raise FileExistsError(f"{path} already exists; pass overwrite=True to replace it")
    return save_profile(profile, path)


def check_tokenizer(
    profile: Profile, tokenizer: Tokenizer, *, allow_mismatch: bool = False
) -> bool:
    """Check that ``tokenizer`` is the one ``profile`` was measured with.

    Returns ``True`` when the fingerprints match, ``False`` when the profile has
    no fingerprint (published profiles: cannot be verified) or a mismatch is
    allowed. Raises ``FingerprintMismatchError`` otherwise: residues counted
    with another vocabulary put tokens at other positions.
    """
    expected = profile.tokenizer.fingerprint
    if expected is None:
        return False
    actual = tokenizer.fingerprint()
    if actual == expected:
        return True
    if allow_mismatch:
        return False
    raise FingerprintMismatchError(
        f"profile {profile.model!r} was measured with tokenizer {profile.tokenizer.spec!r} "
        f"(fingerprint {expected}), but tokenizer {tokenizer.spec!r} has fingerprint {actual}; "
        f"use the tokenizer {profile.tokenizer.spec!r}, recalibrate with "
        f"`phaseaware calibrate --model {profile.model} --tokenizer {tokenizer.spec}`, "
        "or pass allow_mismatch=True to use the profile anyway"
    )


def check_period(profile: Profile, period: int) -> None:
    """Raise ``PeriodMismatchError`` unless ``profile.period == period`` (residues mod period)."""
    if profile.period != period:
        raise PeriodMismatchError(
            f"profile {profile.model!r} has period {profile.period} but period {period} is "
            f"required; use a profile measured with period {period} (recalibrate with "
            f"`phaseaware calibrate --model {profile.model} --period {period}`) or drop the "
            "period setting to use the profile's own"
        )
