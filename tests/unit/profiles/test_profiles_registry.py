"""Profile registry: search path precedence, lookups, not-found messages, checks."""

from __future__ import annotations

import dataclasses
import os
import subprocess
import sys
from pathlib import Path

import pytest

from phaseaware.errors import (
    FingerprintMismatchError,
    PeriodMismatchError,
    PhaseawareWarning,
    ProfileNotFoundError,
)
from phaseaware.profiles import registry
from phaseaware.profiles.io import save_profile
from phaseaware.profiles.registry import (
    check_period,
    check_tokenizer,
    find_profile,
    get_profile,
    list_profiles,
    normalize_model_name,
    profile_filename,
    save_user_profile,
    user_profile_dir,
)

BUILTINS = {
    "deepseek-v4-flash-base",
    "deepseek-v4-pro-base",
    "deepseek-v4-flash-0731",
    "deepseek-v4-pro-0813",
    "deepseek-v4.1-flash",
}


@pytest.fixture(autouse=True)
def isolated_home(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """Point the user folder at a temp dir and clear the extra search path."""
    monkeypatch.setenv("PHASEAWARE_HOME", str(tmp_path / "home"))
    monkeypatch.delenv("PHASEAWARE_PROFILE_PATH", raising=False)
    return tmp_path / "home"


def write_variant(folder: Path, name: str, *, model: str) -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    base = get_profile("deepseek-v4-flash-base")
    return save_profile(dataclasses.replace(base, model=model), folder / f"{name}.json")


def test_user_dir_resolution(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    assert user_profile_dir() == tmp_path / "home" / "profiles"
    monkeypatch.delenv("PHASEAWARE_HOME")
    monkeypatch.setenv("XDG_CONFIG_HOME", str(tmp_path / "xdg"))
    assert user_profile_dir() == tmp_path / "xdg" / "phaseaware" / "profiles"
    monkeypatch.delenv("XDG_CONFIG_HOME")
    monkeypatch.setenv("HOME", str(tmp_path / "user"))
    assert user_profile_dir() == tmp_path / "user" / ".config" / "phaseaware" / "profiles"


def test_builtins_listed() -> None:
    entries = list_profiles()
    assert {e.name for e in entries} == BUILTINS
    assert {e.origin for e in entries} == {"builtin"}
    assert [e.name for e in entries] == sorted(e.name for e in entries)


def test_precedence_env_then_user_then_builtin(
    isolated_home: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    user = isolated_home / "profiles"
    first, second = tmp_path / "first", tmp_path / "second"
    write_variant(user, "deepseek-v4-flash-base", model="from-user")
    write_variant(user, "my-model", model="user-only")
    write_variant(second, "my-model", model="from-second")
    write_variant(first, "My-Model", model="from-first")  # names compare case-insensitively
    with pytest.warns(PhaseawareWarning, match="from the user profile folder .* shadows"):
        assert get_profile("deepseek-v4-flash-base").model == "from-user"
    assert get_profile("my-model").model == "user-only"

    monkeypatch.setenv("PHASEAWARE_PROFILE_PATH", os.pathsep.join([str(first), "", str(second)]))
    assert get_profile("my-model").model == "from-first"
    origins = {e.name.lower(): e.origin for e in list_profiles()}
    assert origins["my-model"] == "env" and origins["deepseek-v4-flash-base"] == "user"
    assert origins["deepseek-v4-pro-base"] == "builtin"
    shadowed = [e for e in list_profiles(include_shadowed=True) if e.name.lower() == "my-model"]
    assert [e.origin for e in shadowed] == ["env", "env", "user"]

    monkeypatch.setenv("PHASEAWARE_PROFILE_PATH", str(second))
    assert get_profile("my-model").model == "from-second"


def test_missing_and_hidden_files_ignored(isolated_home: Path, tmp_path: Path, monkeypatch) -> None:
    user = isolated_home / "profiles"
    user.mkdir(parents=True)
    (user / ".half.json.123.tmp").write_text("{")
    (user / ".hidden.json").write_text("{")
    (user / "notes.txt").write_text("x")
    monkeypatch.setenv("PHASEAWARE_PROFILE_PATH", str(tmp_path / "does-not-exist"))
    assert {e.name for e in list_profiles()} == BUILTINS


@pytest.mark.parametrize(
    ("query", "expected"),
    [
        ("deepseek-v4-flash-base", "deepseek-v4-flash-base"),
        ("DeepSeek-V4-Flash-Base", "deepseek-v4-flash-base"),
        ("deepseek-ai/DeepSeek-V4-Flash-Base", "deepseek-v4-flash-base"),
        ("deepseek-v4-flash-base-fp8", "deepseek-v4-flash-base"),
        ("deepseek-ai/DeepSeek-V4-Pro-0813-AWQ", "deepseek-v4-pro-0813"),
        ("deepseek_v4_pro_base", "deepseek-v4-pro-base"),
        ("deepseek-v4.1-flash", "deepseek-v4.1-flash"),
        ("deepseek-v4.1-flash:latest", "deepseek-v4.1-flash"),
    ],
)
def test_lookup(query: str, expected: str) -> None:
    assert find_profile(query).name == expected
    assert get_profile(query).model == expected


def test_longest_prefix_wins(isolated_home: Path) -> None:
    write_variant(isolated_home / "profiles", "deepseek-v4", model="generic")
    assert get_profile("deepseek-v4-flash-base-fp8").model == "deepseek-v4-flash-base"
    assert get_profile("deepseek-v4-something").model == "generic"


# "deepseek-v4-flash" is a hosted alias now (test_profile_aliases.py): it resolves.
@pytest.mark.parametrize("query", ["nope", "deepseek-v4-flash-basement", "deepseek-v4"])
def test_not_found_message(query: str) -> None:
    with pytest.raises(ProfileNotFoundError) as info:
        get_profile(query)
    message = str(info.value)
    assert f"run `phaseaware calibrate --model {query}`" in message
    assert "pass a profile file path" in message
    assert "deepseek-v4-flash-base" in message and "deepseek-v4.1-flash" in message


def test_path_lookup(tmp_path: Path) -> None:
    path = write_variant(tmp_path / "elsewhere", "whatever", model="by-path")
    assert get_profile(str(path)).model == "by-path"
    assert get_profile(path).model == "by-path"
    with pytest.raises(ProfileNotFoundError, match="profile file .* does not exist"):
        get_profile(str(tmp_path / "missing.json"))
    with pytest.raises(ProfileNotFoundError, match="does not exist"):
        get_profile("./missing-model")


def test_cache_reloads_changed_file(tmp_path: Path) -> None:
    path = write_variant(tmp_path, "p", model="one")
    first = get_profile(path)
    assert get_profile(path) is first
    write_variant(tmp_path, "p", model="a-longer-name")
    assert get_profile(path).model == "a-longer-name"


def test_save_user_profile(isolated_home: Path) -> None:
    base = get_profile("deepseek-v4-flash-base")
    mine = dataclasses.replace(base, model="acme/My_Model 7B")
    path = save_user_profile(mine)
    assert path == isolated_home / "profiles" / "my-model-7b.json"
    assert get_profile("acme/my-model-7b").model == "acme/My_Model 7B"
    with pytest.raises(FileExistsError, match="overwrite=True"):
        save_user_profile(mine)
    save_user_profile(mine, overwrite=True)


def test_names() -> None:
    assert normalize_model_name(" deepseek-ai/DeepSeek-V4-Flash ") == "deepseek-v4-flash"
    assert profile_filename("org/Weird:Name!") == "weird-name.json"
    with pytest.raises(ProfileNotFoundError):
        profile_filename("///")


class FakeTokenizer:
    def __init__(self, spec: str, fingerprint: str) -> None:
        self.spec = spec
        self._fingerprint = fingerprint

    def fingerprint(self) -> str:
        return self._fingerprint


def test_check_tokenizer() -> None:
    published = get_profile("deepseek-v4-flash-base")
    unverifiable = dataclasses.replace(
        published, tokenizer=dataclasses.replace(published.tokenizer, fingerprint=None)
    )
    assert check_tokenizer(unverifiable, FakeTokenizer("x", "sha256:1")) is False
    with pytest.raises(FingerprintMismatchError):  # built-ins record the V4 fingerprint
        check_tokenizer(published, FakeTokenizer("x", "sha256:1"))
    measured = dataclasses.replace(
        published, tokenizer=dataclasses.replace(published.tokenizer, fingerprint="sha256:aa")
    )
    assert check_tokenizer(measured, FakeTokenizer("deepseek-v4", "sha256:aa")) is True
    other = FakeTokenizer("tiktoken:cl100k_base", "sha256:bb")
    with pytest.raises(FingerprintMismatchError) as info:
        check_tokenizer(measured, other)
    message = str(info.value)
    assert "measured with tokenizer 'deepseek-v4'" in message
    assert "recalibrate" in message and "allow_mismatch=True" in message
    assert check_tokenizer(measured, other, allow_mismatch=True) is False


def test_check_period() -> None:
    profile = get_profile("deepseek-v4-flash-base")
    check_period(profile, 8)
    with pytest.raises(PeriodMismatchError, match="has period 8 but period 4 is required"):
        check_period(profile, 4)


def test_no_io_or_heavy_imports_at_import() -> None:
    code = (
        "import sys\n"
        "touched = []\n"
        "def hook(event, args):\n"
        "    if event in ('open', 'os.listdir', 'os.scandir') and args and args[0] is not None:\n"
        "        name = str(args[0])\n"
        "        if name.endswith('.json') or name.rstrip('/').endswith('builtin'):\n"
        "            touched.append(name)\n"
        "sys.addaudithook(hook)\n"
        "import phaseaware.profiles.registry, phaseaware.profiles.io, phaseaware.charts\n"
        "import phaseaware.intervals\n"
        "import phaseaware.cli.profile_cmd\n"
        "assert not touched, touched\n"
        "heavy = [m for m in ('torch', 'transformers', 'openai', 'scipy') if m in sys.modules]\n"
        "assert not heavy, heavy\n"
    )
    root = Path(registry.__file__).parents[2]
    subprocess.run([sys.executable, "-c", code], check=True, cwd=root)
