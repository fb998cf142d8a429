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


# --- the safe-write rule (issue 25 item 1) -------------------------------------------------


def test_devices_fifos_sockets_and_folders_are_refused(tmp_path: Path) -> None:
    import socket

    fifo = tmp_path / "fifo"
    os.mkfifo(fifo)
    sock_path = tmp_path / "s"
    server = socket.socket(socket.AF_UNIX)
    server.bind(str(sock_path))
    try:
        for target, kind in (
            (Path("/dev/null"), "a character device"),
            (fifo, "a FIFO (named pipe)"),
            (sock_path, "a socket"),
            (tmp_path, "a folder"),
        ):
            with pytest.raises(FilePathError) as info:
                atomic_write_text(target, "x")
            assert str(info.value).startswith(f"cannot write {target}: it is {kind}")
    finally:
        server.close()
    assert stat.S_ISCHR(os.stat("/dev/null").st_mode)
    assert stat.S_ISFIFO(fifo.lstat().st_mode) and stat.S_ISSOCK(sock_path.lstat().st_mode)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["fifo", "s"]  # no temp left


def test_symlinks_are_followed(tmp_path: Path) -> None:
    real = tmp_path / "real.json"
    real.write_text("old")
    link = tmp_path / "link.json"
    link.symlink_to(real)
    assert atomic_write_text(link, "new") == link
    assert link.is_symlink() and real.read_text() == "new"
    dangling = tmp_path / "dangling.json"
    dangling.symlink_to(tmp_path / "later.json")
    atomic_write_text(dangling, "made")
    assert dangling.is_symlink() and (tmp_path / "later.json").read_text() == "made"
    to_device = tmp_path / "dev.json"
    to_device.symlink_to("/dev/null")
    with pytest.raises(FilePathError, match="it is a character device"):
        atomic_write_text(to_device, "x")
    assert to_device.is_symlink()


def test_refuse_same_file(tmp_path: Path) -> None:
    from phaseaware.atomic import refuse_same_file

    log = tmp_path / "x.jsonl"
    log.write_text("log")
    os.link(log, tmp_path / "hard.jsonl")
    (tmp_path / "sym.jsonl").symlink_to(log)
    for same in (log, tmp_path / "hard.jsonl", tmp_path / "sym.jsonl", tmp_path / "." / "x.jsonl"):
        with pytest.raises(FilePathError, match="is the same file as the log"):
            refuse_same_file(same, {"the log": log})
    with pytest.raises(FilePathError, match="same file"):  # neither exists yet
        refuse_same_file(tmp_path / "new.json", {"the log": tmp_path / "sub" / ".." / "new.json"})
    refuse_same_file(tmp_path / "other.json", {"the log": log, "nothing": None})


def test_os_errors_name_the_path(tmp_path: Path) -> None:
    with pytest.raises(FilePathError, match=r"cannot write /proc/phaseaware-test\.json: "):
        atomic_write_text("/proc/phaseaware-test.json", "x")


def test_lock_is_exclusive_reentrant_and_names_the_holder(tmp_path: Path) -> None:
    import subprocess
    import sys

    from phaseaware.errors import FileBusyError
    from phaseaware.filelock import hold_lock

    log = tmp_path / "x.jsonl"
    with hold_lock(log, what="calibration log"), hold_lock(log):  # re-entrant in one process
        other = subprocess.run(
            [sys.executable, "-c", "import sys; from phaseaware.filelock import hold_lock\n"
             "try:\n  hold_lock(sys.argv[1]).__enter__()\n"
             "except Exception as e: print(type(e).__name__, e)", str(log)],
            capture_output=True, text=True, env={**os.environ, "PYTHONPATH": os.pathsep.join(sys.path)},
        )  # fmt: skip
        assert other.stdout.startswith(
            f"FileBusyError file {log} is in use by process {os.getpid()}"
        )
    with hold_lock(log):  # released on exit
        pass
    assert not log.exists()  # the lock never creates the file it guards
    assert FileBusyError.__name__ in other.stdout


def test_lock_refuses_another_thread(tmp_path: Path) -> None:
    import threading

    from phaseaware.errors import FileBusyError
    from phaseaware.filelock import hold_lock

    errors: list[BaseException] = []

    def second() -> None:
        try:
            with hold_lock(tmp_path / "x.jsonl"):
                pass
        except FileBusyError as exc:
            errors.append(exc)

    with hold_lock(tmp_path / "x.jsonl"):
        worker = threading.Thread(target=second)
        worker.start()
        worker.join()
    assert len(errors) == 1 and "another thread of this process" in str(errors[0])
    second()  # released: the same call now succeeds
    assert len(errors) == 1
