"""Atomic writes: all-or-nothing, no temporary files left behind."""

from __future__ import annotations

import os
import stat
from pathlib import Path

import pytest

from phaseaware import atomic
from phaseaware.atomic import atomic_write_bytes, atomic_write_text
from phaseaware.errors import FilePathError


def test_writes_new_file_and_replaces(tmp_path: Path) -> None:
    target = tmp_path / "p.json"
    assert atomic_write_text(target, "first ≡\n") == target
    assert target.read_bytes() == "first ≡\n".encode()
    atomic_write_bytes(target, b"second")
    assert target.read_bytes() == b"second"
    assert sorted(os.listdir(tmp_path)) == ["p.json"]


def test_new_file_mode_and_existing_mode_kept(tmp_path: Path) -> None:
    fresh = tmp_path / "fresh.txt"
    atomic_write_text(fresh, "x")
    assert stat.S_IMODE(fresh.stat().st_mode) == 0o644
    private = tmp_path / "private.txt"
    private.write_text("old")
    private.chmod(0o600)
    atomic_write_text(private, "new")
    assert stat.S_IMODE(private.stat().st_mode) == 0o600


@pytest.mark.parametrize("failing", ["fsync", "replace"])
def test_failure_keeps_old_content_and_cleans_up(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, failing: str
) -> None:
    target = tmp_path / "p.json"
    target.write_text("old content")

    def boom(*args: object) -> None:
        raise OSError(f"simulated {failing} failure")

    monkeypatch.setattr(atomic.os, failing, boom)
    with pytest.raises(OSError, match="simulated"):
        atomic_write_text(target, "new content that must not appear half-written")
    monkeypatch.undo()
    assert target.read_text() == "old content"
    assert sorted(os.listdir(tmp_path)) == ["p.json"]


def test_interrupted_write_leaves_no_partial_file(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    target = tmp_path / "p.json"
    real_fdopen = os.fdopen

    class HalfWriter:
        def __init__(self, fd: int, mode: str) -> None:
            self._handle = real_fdopen(fd, mode)

        def __enter__(self) -> HalfWriter:
            return self

        def __exit__(self, *exc: object) -> None:
            self._handle.close()

        def write(self, data: bytes) -> None:
            self._handle.write(data[: len(data) // 2])
            raise KeyboardInterrupt  # e.g. Ctrl-C in the middle of a write

    monkeypatch.setattr(atomic.os, "fdopen", HalfWriter)
    with pytest.raises(KeyboardInterrupt):
        atomic_write_bytes(target, b"0123456789")
    assert not target.exists()
    assert os.listdir(tmp_path) == []


def test_missing_folder_is_an_error(tmp_path: Path) -> None:
    with pytest.raises(FilePathError, match="does not exist"):
        atomic_write_text(tmp_path / "nope" / "p.json", "x")


def test_encoding_error_writes_nothing(tmp_path: Path) -> None:
    with pytest.raises(UnicodeEncodeError):
        atomic_write_text(tmp_path / "p.txt", "≡", encoding="ascii")
    assert os.listdir(tmp_path) == []
