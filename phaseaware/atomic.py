"""Atomic file writes: readers see the old file or the new one, never half of one.

The data goes to a temporary file in the *same folder* (so ``os.replace`` is a
rename on one file system), is flushed and fsynced, then renamed over the
target. On any error the temporary file is removed and the target is untouched.

A process killed mid-write (SIGKILL, power loss) cannot remove its temporary
file ``.NAME.<random>.tmp``; the next write to ``NAME`` removes every such file
older than :data:`STALE_SECONDS` (younger ones may belong to a writer still at work).
"""

from __future__ import annotations

import contextlib
import os
import tempfile
import time
from pathlib import Path

__all__ = ["STALE_SECONDS", "atomic_write_bytes", "atomic_write_text", "remove_stale_temps"]

STALE_SECONDS = 600.0


def remove_stale_temps(target: Path, *, older_than: float = STALE_SECONDS) -> list[Path]:
    """Remove ``.NAME.*.tmp`` files of ``target`` left by killed writers; return them."""
    folder = target.parent if str(target.parent) else Path(".")
    cutoff = time.time() - older_than
    removed: list[Path] = []
    with contextlib.suppress(OSError):
        for path in folder.glob(f".{target.name}.*.tmp"):
            with contextlib.suppress(OSError):
                if path.is_file() and path.stat().st_mtime < cutoff:
                    path.unlink()
                    removed.append(path)
    return removed


def atomic_write_bytes(
    path: str | os.PathLike[str], data: bytes, *, mode: int | None = None
) -> Path:
    """Write ``data`` to ``path`` atomically; return the path.

    The parent folder must exist (it is not created: a typo in a folder name
    should fail loudly). ``mode`` sets the permission bits of the new file;
    by default an existing file keeps its bits and a new one gets ``0o644``.
    """
    target = Path(path)
    if mode is None:
        try:
            mode = target.stat().st_mode & 0o777
        except OSError:
            mode = 0o644
    folder = target.parent if str(target.parent) else Path(".")
    if not folder.is_dir():
        raise FileNotFoundError(f"cannot write {target}: folder {folder} does not exist")
    remove_stale_temps(target)
    fd, tmp_name = tempfile.mkstemp(prefix=f".{target.name}.", suffix=".tmp", dir=folder)
    try:
        with os.fdopen(fd, "wb") as handle:
            handle.write(data)
            handle.flush()
            os.fsync(handle.fileno())
        os.chmod(tmp_name, mode)
        os.replace(tmp_name, target)
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(tmp_name)
        raise
    _fsync_folder(folder)
    return target


def atomic_write_text(
    path: str | os.PathLike[str], text: str, *, encoding: str = "utf-8", mode: int | None = None
) -> Path:
    """Write ``text`` to ``path`` atomically (encoded with ``encoding``); return the path.

    Newlines are written as given (no platform translation).
    """
    return atomic_write_bytes(path, text.encode(encoding), mode=mode)


def _fsync_folder(folder: Path) -> None:
    """Persist the rename itself (POSIX); silently skipped where folders can't be opened."""
    try:
        fd = os.open(folder, os.O_RDONLY)
    except OSError:
        return
    try:
        with contextlib.suppress(OSError):
            os.fsync(fd)
    finally:
        os.close(fd)
