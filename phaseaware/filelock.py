"""One writer per file: an exclusive lock held for a run (a calibration log).

The lock is a separate file ``.NAME.lock`` beside ``NAME`` (the log itself is
replaced by atomic writes, so its inode cannot carry a lock), locked with
``fcntl.flock`` (``msvcrt.locking`` on Windows) and holding the owner's PID for
the message a second run prints. The operating system releases the lock when
the process dies (kill -9 included), so a stale lock file never blocks a rerun.

Locks are re-entrant within one thread (the CLI locks before it loads a model,
the calibration runner locks again when it opens the log); another thread of the
same process is refused like another process.
"""

from __future__ import annotations

import contextlib
import os
import threading
from collections.abc import Iterator
from pathlib import Path

from phaseaware.errors import FileBusyError, FilePathError

__all__ = ["hold_lock", "lock_path"]

_HELD: dict[str, tuple[int, int, int]] = {}  # lock path -> (fd, depth, owner thread id)
_GUARD = threading.Lock()


def lock_path(path: str | os.PathLike[str]) -> Path:
    """The lock file of ``path``: ``.NAME.lock`` in the same folder (symlinks followed)."""
    target = Path(os.path.realpath(path))
    return target.with_name(f".{target.name}.lock")


@contextlib.contextmanager
def hold_lock(path: str | os.PathLike[str], *, what: str = "file") -> Iterator[Path]:
    """Hold the exclusive lock of ``path`` for the ``with`` block.

    Raises ``FileBusyError`` at once (no waiting) when another process holds it,
    naming that process's PID; ``FilePathError`` when the lock file cannot be made.
    """
    lock = lock_path(path)
    key = str(lock)
    me = threading.get_ident()
    with _GUARD:
        held = _HELD.get(key)
        if held is not None and held[2] != me:
            raise FileBusyError(
                f"{what} {path} is in use by another thread of this process (lock {lock}); "
                "wait for that run to finish, or give this run another file"
            )
        if held is not None:
            _HELD[key] = (held[0], held[1] + 1, me)
        else:
            _HELD[key] = (_acquire(lock, path=path, what=what), 1, me)
    try:
        yield lock
    finally:
        with _GUARD:
            fd, depth, _ = _HELD[key]
            if depth > 1:
                _HELD[key] = (fd, depth - 1, me)
            else:
                del _HELD[key]
                _release(fd)


def _acquire(lock: Path, *, path: str | os.PathLike[str], what: str) -> int:
    try:
        fd = os.open(lock, os.O_RDWR | os.O_CREAT, 0o644)
    except OSError as exc:
        raise FilePathError(
            f"cannot lock {what} {path}: cannot create {lock} ({exc.strerror or exc})"
        ) from None
    if not _try_lock(fd):
        holder = _read_pid(fd)
        os.close(fd)
        who = f"process {holder}" if holder else "another process"
        raise FileBusyError(
            f"{what} {path} is in use by {who} (lock {lock}); wait for that run to finish, "
            "or give this run another file"
        )
    os.ftruncate(fd, 0)
    os.write(fd, f"{os.getpid()}\n".encode())
    return fd


def _try_lock(fd: int) -> bool:
    try:
        import fcntl
    except ImportError:  # Windows
        import msvcrt

        try:
            msvcrt.locking(fd, msvcrt.LK_NBLCK, 1)  # type: ignore[attr-defined,unused-ignore]
        except OSError:
            return False
        return True
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except OSError:
        return False
    return True


def _read_pid(fd: int) -> str:
    with contextlib.suppress(OSError):
        os.lseek(fd, 0, os.SEEK_SET)
        text = os.read(fd, 32).decode("ascii", "replace").strip()
        if text.isdigit():
            return text
    return ""


def _release(fd: int) -> None:
    # The lock file stays (removing it would race a process opening it); the
    # lock itself goes with the descriptor.
    with contextlib.suppress(OSError):
        os.ftruncate(fd, 0)
    os.close(fd)
