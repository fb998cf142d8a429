"""Atomic file writes: readers see the old file or the new one, never half of one.

The data goes to a temporary file in the *same folder* (so ``os.replace`` is a
rename on one file system), is flushed and fsynced, then renamed over the
target. On any error the temporary file is removed and the target is untouched.
"""

from __future__ import annotations

import contextlib
import os
import tempfile
from pathlib import Path

__all__ = ["atomic_write_bytes", "atomic_write_text"]


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
