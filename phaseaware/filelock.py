"""One writer per file: an exclusive lock held for a run (a calibration log).

Two locks guard a file, both taken with ``fcntl.flock`` (``msvcrt.locking`` on
Windows), both released by the operating system when the process dies (kill -9
included), so a stale lock never blocks a rerun:

* **the name:** a separate file ``.NAME.lock`` beside ``NAME`` (symlinks in the
  path resolved), holding the owner's PID for the message a second run prints. It
  exists before the guarded file does (a new log is created under it).
* **the file itself:** its device and inode, once it exists, so every name of one
  file (hard links) shares the lock. Whoever creates or replaces the file under
  the name lock calls :func:`hold_lock` again (re-entrant) to lock the new inode.

The lock file is opened without following links (``O_NOFOLLOW``) and must be a
regular file owned by this user with one name: a planted symlink or hard link
(to a file of the user's that the lock would otherwise truncate) is refused with
a :class:`~phaseaware.errors.FilePathError` saying what to remove. The guarded file
is only opened to read (never written or truncated by the lock).

Locks are re-entrant within one thread (the CLI locks before it loads a model,
the calibration log locks again when it opens); another thread of the same
process is refused like another process.
"""

from __future__ import annotations

import contextlib
import os
import stat
import threading
from collections.abc import Callable, Iterator
from pathlib import Path

from phaseaware.errors import FileBusyError, FilePathError

__all__ = ["hold_lock", "lock_path"]

# lock key -> (fd, depth, owner thread id); keys: ("name", lock path) or ("inode", dev, ino)
_HELD: dict[tuple[object, ...], tuple[int, int, int]] = {}
_GUARD = threading.Lock()
_NOFOLLOW = getattr(os, "O_NOFOLLOW", 0)
_NONBLOCK = getattr(os, "O_NONBLOCK", 0)
_FIX = "wait for that run to finish, or give this run another file"


def lock_path(path: str | os.PathLike[str]) -> Path:
    """The lock file of ``path``: ``.NAME.lock`` in the same folder (symlinks followed)."""
    target = Path(os.path.realpath(path))
    return target.with_name(f".{target.name}.lock")


@contextlib.contextmanager
def hold_lock(path: str | os.PathLike[str], *, what: str = "file") -> Iterator[Path]:
    """Hold the exclusive locks of ``path`` (its name, and the file once it exists)
    for the ``with`` block.

    Raises ``FileBusyError`` at once (no waiting) when another process or thread
    holds either, naming the holder's PID where known; ``FilePathError`` when the
    lock file cannot be made or is not a plain file of this user's.
    """
    lock = lock_path(path)
    me = threading.get_ident()
    taken: list[tuple[object, ...]] = []
    try:
        with _GUARD:
            key: tuple[object, ...] = ("name", str(lock))
            taken.append(_enter(key, me, path, what, lambda: _acquire(lock, path=path, what=what)))
        taken.extend(_lock_inode(path, what=what, me=me))
        yield lock
    finally:
        with _GUARD:
            for key in reversed(taken):
                _leave(key)


def _enter(
    key: tuple[object, ...],
    me: int,
    path: str | os.PathLike[str],
    what: str,
    acquire: Callable[[], int] | None,
) -> tuple[object, ...]:
    """Take ``key`` (caller holds ``_GUARD``): re-entrant in this thread, refused in another."""
    held = _HELD.get(key)
    if held is not None and held[2] != me:
        raise FileBusyError(f"{what} {path} is in use by another thread of this process; {_FIX}")
    if held is not None:
        _HELD[key] = (held[0], held[1] + 1, me)
    else:
        if acquire is None:
            raise AssertionError(f"lock {key} is not held")
        _HELD[key] = (acquire(), 1, me)
    return key


def _leave(key: tuple[object, ...]) -> None:
    fd, depth, me = _HELD[key]
    if depth > 1:
        _HELD[key] = (fd, depth - 1, me)
        return
    del _HELD[key]
    if key[0] == "name":
        _release(fd)
    else:
        with contextlib.suppress(OSError):
            os.close(fd)


def _lock_inode(path: str | os.PathLike[str], *, what: str, me: int) -> list[tuple[object, ...]]:
    """Lock the file at ``path`` by device and inode (nothing while it does not exist)."""
    real = os.path.realpath(path)
    try:
        if not stat.S_ISREG(os.stat(real).st_mode):
            return []  # a device is never opened (the output checks refuse it)
        fd = os.open(real, os.O_RDONLY | _NONBLOCK)
    except OSError:
        return []  # absent (created later, then locked again) or unreadable (the write fails later)
    try:
        info = os.fstat(fd)
        if not stat.S_ISREG(info.st_mode):
            return []  # not a file a run writes; the output checks refuse it
        key: tuple[object, ...] = ("inode", info.st_dev, info.st_ino)
        with _GUARD:
            if key in _HELD:
                _enter(key, me, path, what, None)
                return [key]
            if not _try_lock(fd):
                raise FileBusyError(
                    f"{what} {path} is in use by another process under another name (a hard "
                    f"link to the same file); {_FIX}"
                )
            _HELD[key] = (fd, 1, me)
            fd = -1
            return [key]
    finally:
        if fd >= 0:
            os.close(fd)


def _acquire(lock: Path, *, path: str | os.PathLike[str], what: str) -> int:
    try:
        fd = os.open(lock, os.O_RDWR | os.O_CREAT | _NOFOLLOW | _NONBLOCK, 0o600)
    except OSError as exc:
        if lock.is_symlink():
            raise FilePathError(
                f"cannot lock {what} {path}: the lock file {lock} is a symbolic link, which "
                "a lock never is (someone may have planted it to make this run overwrite "
                "another file); remove the link and run again"
            ) from None
        raise FilePathError(
            f"cannot lock {what} {path}: cannot create {lock} ({exc.strerror or exc})"
        ) from None
    try:
        _check_lock_file(fd, lock, path=path, what=what)
    except BaseException:
        os.close(fd)
        raise
    if not _try_lock(fd):
        holder = _read_pid(fd)
        os.close(fd)
        who = f"process {holder}" if holder else "another process"
        raise FileBusyError(f"{what} {path} is in use by {who} (lock {lock}); {_FIX}")
    os.ftruncate(fd, 0)
    os.write(fd, f"{os.getpid()}\n".encode())
    return fd


def _check_lock_file(fd: int, lock: Path, *, path: str | os.PathLike[str], what: str) -> None:
    """Refuse a lock file that is not a regular file of this user's with one name."""
    info = os.fstat(fd)
    problem = ""
    if not stat.S_ISREG(info.st_mode):
        problem = "is not a regular file"
    elif hasattr(os, "geteuid") and info.st_uid != os.geteuid():
        problem = f"belongs to another user (uid {info.st_uid})"
    elif info.st_nlink != 1:
        problem = f"has {info.st_nlink} names (a hard link to another file)"
    if problem:
        raise FilePathError(
            f"cannot lock {what} {path}: the lock file {lock} {problem}; a lock file is a "
            "plain file this user created (someone may have planted it to make this run "
            "overwrite another file); remove it and run again"
        )


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
