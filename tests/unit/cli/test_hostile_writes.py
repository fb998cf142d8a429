"""Hostile input, round 5 (issue 38): writes that never touch a user's files.

Each test is the case that found the cause: a user's ``.NAME.*.tmp`` files beside an
output (deleted by the stale-temp glob), an output named ``*``, a symlink planted where
``calibrate --emit-lm-eval-task`` writes its data file (followed: root's run overwrote
the file it pointed to), existing and dangling. Every case runs the real CLI.
"""

from __future__ import annotations

import json
import os
import time
from pathlib import Path

import pytest

from phaseaware.atomic import (
    STALE_SECONDS,
    atomic_write_text,
    is_own_temp,
    own_temp_name,
    remove_stale_temps,
)
from tests.support.cli_run import run_cli

TOKENIZER = "tiktoken:cl100k_base"
OLD = time.time() - STALE_SECONDS - 60


def _old_file(path: Path, text: str = "mine\n") -> Path:
    path.write_text(text, encoding="utf-8")
    os.utime(path, (OLD, OLD))
    return path


@pytest.fixture()
def folder(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.chdir(tmp_path)
    lines = []
    for i in range(40):
        pad = "filler text. " * (3 + i % 11)
        doc = {"prompt": f"{pad}The key is K{i}x. {pad}", "needle": f"K{i}x", "correct": i % 3 != 0}
        lines.append(json.dumps(doc))
    (tmp_path / "eval.jsonl").write_text("\n".join(lines) + "\n", encoding="utf-8")
    return tmp_path


def test_score_profile_out_keeps_a_users_tmp_files(folder, capsys):
    """``score --profile-out out/profile.json`` deleted ``.profile.json.my-edits.tmp``."""
    (folder / "out").mkdir()
    users = [
        _old_file(folder / "out" / ".profile.json.my-edits.tmp"),
        _old_file(folder / "out" / ".profile.json.abc123.tmp"),  # the old temp form, a user's
        _old_file(folder / "out" / ".phaseaware-notes.tmp"),
    ]
    code, _, _ = run_cli(
        ["score", "--format", "jsonl", "--tokenizer", TOKENIZER, "eval.jsonl", "--model", "m",
         "--profile-out", "out/profile.json"],
        capsys,
    )  # fmt: skip
    assert code == 0
    assert all(p.read_text(encoding="utf-8") == "mine\n" for p in users)
    assert sorted(p.name for p in (folder / "out").iterdir()) == sorted(
        ["profile.json", *(p.name for p in users)]
    )


def test_an_output_named_star_is_an_ordinary_name(folder, capsys):
    """An output named ``out/*`` deleted ``.notes.draft.tmp`` and ``.zshrc.backup.tmp``."""
    (folder / "out").mkdir()
    users = [_old_file(folder / "out" / n) for n in (".notes.draft.tmp", ".zshrc.backup.tmp")]
    code, _, _ = run_cli(
        ["score", "--format", "jsonl", "--tokenizer", TOKENIZER, "eval.jsonl", "--model", "m",
         "--profile-out", "out/*"],
        capsys,
    )  # fmt: skip
    assert code == 0 and json.loads((folder / "out" / "*").read_text(encoding="utf-8"))
    assert all(p.read_text(encoding="utf-8") == "mine\n" for p in users)


@pytest.mark.parametrize("name", ["[ab]", "?", "**", ".x.*.tmp"])
def test_glob_characters_in_a_name_match_nothing_else(tmp_path, name):
    others = [_old_file(tmp_path / n) for n in ("a", "b", ".a.1.tmp", f".{name}.1.tmp")]
    atomic_write_text(tmp_path / name, "new")
    assert (tmp_path / name).read_text() == "new"
    assert all(p.read_text(encoding="utf-8") == "mine\n" for p in others)


def test_only_provably_own_stale_temps_are_removed(tmp_path):
    ours_stale = _old_file(tmp_path / own_temp_name(), "partial")
    ours_fresh = tmp_path / own_temp_name()
    ours_fresh.write_text("partial")  # a writer still at work
    token = "0" * 32
    forged = _old_file(tmp_path / f".phaseaware-{token}-{'0' * 16}.tmp")  # wrong tag
    linked_target = _old_file(tmp_path / "precious.txt")
    link = tmp_path / own_temp_name()
    link.symlink_to(linked_target)  # our form, but a link: never ours
    hard = tmp_path / own_temp_name()
    os.link(linked_target, hard)  # our form, but a second name of a user's file
    removed = remove_stale_temps(tmp_path / "out.json")
    assert removed == [ours_stale]
    assert not ours_stale.exists() and ours_fresh.exists() and forged.exists()
    assert link.is_symlink() and hard.exists()
    assert linked_target.read_text(encoding="utf-8") == "mine\n"
    assert is_own_temp(ours_fresh.name) and not is_own_temp(forged.name)
    assert not is_own_temp(".profile.json.abc123.tmp")


@pytest.mark.skipif(os.geteuid() != 0, reason="chown needs root")
def test_another_users_temp_of_our_form_is_not_removed(tmp_path):
    theirs = _old_file(tmp_path / own_temp_name(), "theirs")
    os.chown(theirs, 65534, 65534)
    assert remove_stale_temps(tmp_path / "out.json") == []
    assert theirs.exists()


# --- the emitted lm-eval task's data file ----------------------------------------------

EMIT = ["calibrate", "--backend", "callable", "--model", "unused:answer", "--tokenizer",
        TOKENIZER, "--chat-format", "chatml", "--context-tokens", "160", "--base-prompts", "1",
        "--period", "2", "--emit-lm-eval-task"]  # fmt: skip


@pytest.mark.skipif(os.geteuid() != 0, reason="chown needs root")
@pytest.mark.parametrize("dangling", [False, True])
def test_a_planted_link_where_the_task_data_goes_is_refused(folder, capsys, dangling):
    """Another user's link in a shared sticky folder, named as the task's JSONL: root's run
    overwrote the file it pointed to (the YAML's own path was refused correctly)."""
    shared = folder / "shared"
    shared.mkdir()
    shared.chmod(0o1777)
    victim = folder / ("absent.txt" if dangling else "victim.txt")
    if not dangling:
        victim.write_text("precious\n", encoding="utf-8")
    link = shared / "phaseaware_phase_sweep.jsonl"
    link.symlink_to(victim)
    os.lchown(link, 65534, -1)
    code, _, err = run_cli([*EMIT, "shared"], capsys)
    assert code == 1 and "is a symlink another user" in err and str(link) in err
    if dangling:
        assert not victim.exists()
    else:
        assert victim.read_text(encoding="utf-8") == "precious\n"
    assert sorted(p.name for p in shared.iterdir()) == ["phaseaware_phase_sweep.jsonl"]


@pytest.mark.skipif(os.geteuid() != 0, reason="chown needs root")
def test_a_planted_link_as_the_task_folder_is_refused_before_mkdir(folder, capsys):
    shared = folder / "shared"
    shared.mkdir()
    shared.chmod(0o1777)
    elsewhere = folder / "elsewhere"
    elsewhere.mkdir()
    link = shared / "task"
    link.symlink_to(elsewhere)
    os.lchown(link, 65534, -1)
    code, _, err = run_cli([*EMIT, "shared/task/sub"], capsys)
    assert code == 1 and "is a symlink another user" in err
    assert list(elsewhere.iterdir()) == []  # nothing created through the link


def test_the_task_yaml_names_the_data_file_as_written(folder, capsys):
    """An own link to a folder is still followed; the YAML points at the path as given."""
    (folder / "real").mkdir()
    (folder / "task").symlink_to(folder / "real")
    code, _, _ = run_cli([*EMIT, "task"], capsys)
    assert code == 0
    yaml = (folder / "real" / "phaseaware_phase_sweep.yaml").read_text(encoding="utf-8")
    assert str(folder / "task" / "phaseaware_phase_sweep.jsonl") in yaml
    assert (folder / "real" / "phaseaware_phase_sweep.jsonl").stat().st_size > 0
