"""Profiles from places the user does not control: the current folder, name variants,
files and folders of other users (ownership and every folder up to the home or root)."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from phaseaware.cli.main import main
from phaseaware.errors import PhaseawareWarning, ProfileError
from phaseaware.profiles.registry import builtin_profile_dir, get_profile, profile_path

BUILTIN = builtin_profile_dir() / "deepseek-v4-flash-base.json"
NAME = "deepseek-v4-flash-base"
needs_root = pytest.mark.skipif(
    not hasattr(os, "geteuid") or os.geteuid() != 0, reason="needs chown (root)"
)


def _perfect() -> str:
    doc = json.loads(BUILTIN.read_text(encoding="utf-8"))
    doc["residue_accuracy"] = [1.0] * len(doc["residue_accuracy"])
    doc["ci_high"] = [1.0] * len(doc["ci_high"])
    return json.dumps(doc)


@pytest.fixture()
def home(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    folder = tmp_path / "home"
    (folder / "profiles").mkdir(parents=True)
    monkeypatch.setenv("PHASEAWARE_HOME", str(folder))
    monkeypatch.delenv("PHASEAWARE_PROFILE_PATH", raising=False)
    monkeypatch.delenv("PHASEAWARE_TRUST_PROFILES", raising=False)
    return folder


def test_a_bare_name_never_reads_the_current_folder(
    home: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    repo = tmp_path / "cloned-repo"
    repo.mkdir()
    (repo / NAME).write_text(_perfect(), encoding="utf-8")  # planted, no extension
    (repo / f"{NAME}.json").write_text(_perfect(), encoding="utf-8")
    monkeypatch.chdir(repo)
    assert profile_path(NAME) == BUILTIN
    assert get_profile(NAME).residue_accuracy != (1.0,) * 8
    assert main(["profile", "show", NAME]) == 0
    shown = capsys.readouterr()
    assert "worst: r=3 29.7%" in shown.out and "warning" not in shown.err  # the built-in
    # written as a path, the file is read (the user said so)
    assert profile_path(f"./{NAME}") == Path(f"./{NAME}")
    assert profile_path(f"{NAME}.json") == Path(f"{NAME}.json")
    assert get_profile(f"./{NAME}").residue_accuracy == (1.0,) * 8


@pytest.mark.parametrize(
    "filename", [f"{NAME}.json", "DeepSeek_V4 Flash-Base.json", "DEEPSEEK-V4-FLASH-BASE.json"]
)
def test_shadowing_from_the_user_folder_warns_for_every_name_variant(
    home: Path, filename: str
) -> None:
    (home / "profiles" / filename).write_text(_perfect(), encoding="utf-8")
    with pytest.warns(
        PhaseawareWarning, match="from the user profile folder .* shadows the built-in"
    ):
        assert get_profile("deepseek-ai/DeepSeek-V4-Flash-Base").residue_accuracy == (1.0,) * 8


def test_shadowing_from_the_env_path_warns_for_a_name_variant(
    home: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    extra = tmp_path / "extra"
    extra.mkdir()
    (extra / "DeepSeek_V4 Flash-Base.json").write_text(_perfect(), encoding="utf-8")
    monkeypatch.setenv("PHASEAWARE_PROFILE_PATH", str(extra))
    with pytest.warns(PhaseawareWarning, match=r"from \$PHASEAWARE_PROFILE_PATH .* shadows"):
        get_profile(NAME)


@needs_root
def test_a_profile_owned_by_another_user_is_refused(home: Path, tmp_path: Path) -> None:
    path = tmp_path / "p.json"
    path.write_text(BUILTIN.read_text(encoding="utf-8"), encoding="utf-8")
    path.chmod(0o644)
    os.chown(path, 65534, 65534)
    with pytest.raises(ProfileError, match=r"belongs to another user \(uid 65534\)"):
        get_profile(path)


@needs_root
def test_a_folder_owned_by_another_user_is_refused(home: Path, tmp_path: Path) -> None:
    folder = tmp_path / "theirs"
    folder.mkdir(mode=0o755)
    path = folder / "p.json"
    path.write_text(BUILTIN.read_text(encoding="utf-8"), encoding="utf-8")
    os.chown(folder, 65534, 65534)
    with pytest.raises(ProfileError, match=r"is in folder .*theirs, which belongs to another user"):
        get_profile(path)


def test_a_group_writable_grandparent_is_refused(home: Path, tmp_path: Path) -> None:
    grand = tmp_path / "shared"
    (grand / "mine").mkdir(parents=True)
    path = grand / "mine" / "p.json"
    path.write_text(BUILTIN.read_text(encoding="utf-8"), encoding="utf-8")
    grand.chmod(0o775)
    with pytest.raises(ProfileError, match=r"is under folder .*shared, which other users can "
                       r"write to \(mode 775\)"):  # fmt: skip
        get_profile(path)
    grand.chmod(0o755)
    assert get_profile(path).model == NAME


def test_a_sticky_shared_folder_is_fine_for_the_users_own_entry(home: Path, tmp_path: Path) -> None:
    """Like /tmp: others may write the folder, but cannot replace what this user owns."""
    sticky = tmp_path / "sticky"
    (sticky / "mine").mkdir(parents=True)
    path = sticky / "mine" / "p.json"
    path.write_text(BUILTIN.read_text(encoding="utf-8"), encoding="utf-8")
    sticky.chmod(0o1777)
    assert get_profile(path).model == NAME


def test_trust_is_checked_for_the_user_folder_too(home: Path) -> None:
    path = home / "profiles" / "my-model.json"
    doc = json.loads(BUILTIN.read_text(encoding="utf-8"))
    doc["model"] = "my-model"
    path.write_text(json.dumps(doc), encoding="utf-8")
    (home / "profiles").chmod(0o777)
    with pytest.raises(ProfileError, match="which other users can write to"):
        get_profile("my-model")
