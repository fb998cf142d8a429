"""Safe file writes: readers see the old file or the new one, never half of one.

Every file phaseaware writes (profiles, calibration logs, batch files, endpoint
records, plots) goes through :func:`atomic_write_bytes`, which keeps one rule:

* **Only regular files are replaced.** The target must be a regular file or
  absent; a device (``/dev/null``), FIFO, socket or folder is refused with a
  :class:`~phaseaware.errors.FilePathError` naming the path, before anything is
  written (renaming over ``/dev/null`` as root would replace the device node).
* **Symlinks are followed:** a link to a regular file writes that file (the link
  stays a link); a link to a device or folder is refused like the target itself.
  A link that someone else planted in a shared sticky folder (``/tmp``: world-writable
  with the sticky bit, the link owned by neither the folder's owner nor the user) is
  refused, as the kernel's ``fs.protected_symlinks`` refuses to open through it.
* **Never over an input:** :func:`refuse_same_file` compares an output with the
  command's inputs by identity (``os.path.samefile``: device and inode, so hard
  links and ``./x`` spellings count), or by resolved path where a file does not
  exist yet.
* Every ``OSError`` becomes a ``FilePathError`` that names the path and the
  problem (missing folder, permission, read-only file system).

The data goes to a temporary file in the *same folder* (so ``os.replace`` is a
rename on one file system), is flushed and fsynced, then renamed over the
target. On any error the temporary file is removed and the target is untouched.

A process killed mid-write (SIGKILL, power loss) cannot remove its temporary
file. The next write into the same folder removes such files, and only files it can
prove phaseaware made (:func:`is_own_temp`): the name is ``.phaseaware-<32 random hex>-
<16 hex tag>.tmp``, where the tag is a keyed digest of the random part (a form no user
file takes, and the output's own name is never part of it, so no glob over a user's name
is ever built), the file is a regular file (not a link) with one link, owned by the user
running phaseaware, and older than :data:`STALE_SECONDS` (younger ones may belong to a
writer still at work). A user's ``.profile.json.my-edits.tmp`` is never touched.
"""

from __future__ import annotations

import contextlib
import hashlib
import os
import re
import secrets
import stat
import time
from collections.abc import Mapping
from pathlib import Path

from phaseaware.errors import FilePathError

__all__ = [
    "STALE_SECONDS",
    "atomic_write_bytes",
    "atomic_write_text",
    "check_output_path",
    "ensure_output_folder",
    "is_own_temp",
    "own_temp_name",
    "refuse_outputs_over_inputs",
    "refuse_same_file",
    "remove_stale_temps",
]

STALE_SECONDS = 600.0


#: Keys the tag of a temp name: a name with a matching tag was made by :func:`own_temp_name`
#: (a user's file would have to copy the scheme on purpose, and even then it must also be
#: ours by owner, type and age before it is removed).
_TEMP_KEY = b"phaseaware atomic temp v1"
_TEMP_NAME = re.compile(r"\.phaseaware-(?P<token>[0-9a-f]{32})-(?P<tag>[0-9a-f]{16})\.tmp")


def _tag(token: str) -> str:
    return hashlib.blake2b(token.encode("ascii"), key=_TEMP_KEY, digest_size=8).hexdigest()


def own_temp_name() -> str:
    """A fresh temp file name of phaseaware's own form: ``.phaseaware-<token>-<tag>.tmp``."""
    token = secrets.token_hex(16)
    return f".phaseaware-{token}-{_tag(token)}.tmp"


def is_own_temp(name: str) -> bool:
    """Whether ``name`` (a bare file name) has the form only :func:`own_temp_name` makes."""
    found = _TEMP_NAME.fullmatch(name)
    return found is not None and secrets.compare_digest(found["tag"], _tag(found["token"]))


def remove_stale_temps(target: Path, *, older_than: float = STALE_SECONDS) -> list[Path]:
    """Remove the temp files killed phaseaware writers left in ``target``'s folder; return them.

    Only files of phaseaware's own name form (:func:`is_own_temp`) that are regular files
    with one link, owned by this user and older than ``older_than`` seconds; the output's
    name is never turned into a pattern, so no other file of the folder can match.
    """
    folder = target.parent if str(target.parent) else Path(".")
    cutoff = time.time() - older_than
    user = os.geteuid()
    removed: list[Path] = []
    try:
        dir_fd = os.open(folder, os.O_RDONLY | getattr(os, "O_DIRECTORY", 0))
    except OSError:
        return removed
    try:
        with os.scandir(dir_fd) as entries:
            names = [entry.name for entry in entries if is_own_temp(entry.name)]
        for name in names:
            with contextlib.suppress(OSError):
                info = os.lstat(name, dir_fd=dir_fd)
                if (
                    stat.S_ISREG(info.st_mode)
                    and info.st_nlink == 1
                    and info.st_uid == user
                    and info.st_mtime < cutoff
                ):
                    os.unlink(name, dir_fd=dir_fd)
                    removed.append(folder / name)
    finally:
        os.close(dir_fd)
    return removed


def _create_temp(folder: Path) -> tuple[int, str]:
    """Create (``O_EXCL``, mode 0600) a temp file of phaseaware's own name form in ``folder``."""
    flags = os.O_WRONLY | os.O_CREAT | os.O_EXCL | getattr(os, "O_NOFOLLOW", 0)
    for _ in range(100):
        name = str(folder / own_temp_name())
        try:
            return os.open(name, flags, 0o600), name
        except FileExistsError:
            continue
    raise FileExistsError(f"no free temp file name in {folder}")


_KINDS = (
    (stat.S_ISDIR, "a folder; name a file inside it"),
    (stat.S_ISCHR, "a character device, not a regular file; name a regular file"),
    (stat.S_ISBLK, "a block device, not a regular file; name a regular file"),
    (stat.S_ISFIFO, "a FIFO (named pipe), not a regular file; name a regular file"),
    (stat.S_ISSOCK, "a socket, not a regular file; name a regular file"),
)


def check_output_path(path: str | os.PathLike[str]) -> Path:
    """The file a write to ``path`` replaces: ``path`` with symlinks followed.

    Raises ``FilePathError`` naming ``path`` when the target is anything but a
    regular file or nothing (a device, FIFO, socket or folder), or when its folder
    does not exist. Nothing is written.
    """
    given = Path(path)
    _refuse_planted_links(given)
    target = Path(os.path.realpath(given)) if given.is_symlink() else given
    try:
        mode = target.stat().st_mode
    except FileNotFoundError:
        mode = None
    except OSError as exc:
        raise FilePathError(f"cannot write {given}: {_reason(exc)}") from None
    if mode is not None and not stat.S_ISREG(mode):
        kind = next((text for test, text in _KINDS if test(mode)), "not a regular file")
        raise FilePathError(f"cannot write {given}: it is {kind}")
    folder = target.parent if str(target.parent) else Path(".")
    if not folder.is_dir():
        raise FilePathError(
            f"cannot write {given}: folder {folder} does not exist; create it first"
        )
    return target


def ensure_output_folder(folder: str | os.PathLike[str], *, what: str) -> Path:
    """Create ``folder`` (and its parents) for an output, after the planted-link check.

    A symlink another user left in a shared sticky folder on the way to ``folder`` is
    refused before anything is created (``mkdir`` would follow it); ``what`` names the
    output in the error (``"the calibration log"``).
    """
    given = Path(folder) if str(folder) else Path(".")
    _refuse_planted_links(given)
    try:
        given.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise FilePathError(
            f"cannot create folder {given} for {what}: {_reason(exc)}; create it or choose "
            "another path"
        ) from None
    return given


def _refuse_planted_links(given: Path) -> None:
    """Refuse a symlink on the way to ``given`` that sits in a sticky, world-writable folder
    and belongs to neither that folder's owner nor the user (the ``fs.protected_symlinks``
    rule): another user planted it there to turn this write onto a file of ours."""
    current = Path(os.path.abspath(given))
    parts = [current, *current.parents]
    user = os.geteuid()
    for link in parts[:-1]:
        try:
            info = os.lstat(link)
            if not stat.S_ISLNK(info.st_mode):
                continue
            folder = os.stat(link.parent)
        except OSError:
            continue
        shared = folder.st_mode & stat.S_ISVTX and folder.st_mode & stat.S_IWOTH
        if shared and info.st_uid not in (user, folder.st_uid):
            raise FilePathError(
                f"cannot write {given}: {link} is a symlink another user (uid {info.st_uid}) "
                f"left in the shared folder {link.parent}; it is not followed: remove it or "
                "write to a folder of your own"
            )


def refuse_same_file(
    output: str | os.PathLike[str],
    inputs: dict[str, str | os.PathLike[str] | None],
    *,
    output_name: str = "output",
) -> None:
    """Raise ``FilePathError`` if ``output`` is the same file as any of ``inputs``.

    ``inputs`` maps a name for the message (``"the calibration log"``, ``"--log"``)
    to a path (``None``: skipped). Existing files are compared by identity
    (``os.path.samefile``), others by their resolved absolute paths.
    """
    for name, value in inputs.items():
        if value is None:
            continue
        if _same_file(Path(output), Path(value)):
            raise FilePathError(
                f"{output_name} {output} is the same file as {name} {value}; writing it "
                f"would destroy {name}: choose another {output_name}"
            )


def refuse_outputs_over_inputs(
    outputs: Mapping[str, str | os.PathLike[str] | None],
    inputs: Mapping[str, str | os.PathLike[str]],
) -> None:
    """Raise ``FilePathError`` if any of ``outputs`` (flag -> path) is one of ``inputs``
    (description -> path; many files, e.g. every file of a tokenizer folder).

    The same identity rule as :func:`refuse_same_file` (device and inode for files that
    exist, resolved paths for those that do not), in one pass over the inputs.
    """
    by_inode: dict[tuple[int, int], str] = {}
    by_path: dict[str, str] = {}
    for name, value in inputs.items():
        by_path.setdefault(os.path.realpath(value), name)
        with contextlib.suppress(OSError):
            info = os.stat(value)
            by_inode.setdefault((info.st_dev, info.st_ino), name)
    for flag, output in outputs.items():
        if output is None:
            continue
        found = by_path.get(os.path.realpath(output))
        with contextlib.suppress(OSError):
            info = os.stat(output)
            found = by_inode.get((info.st_dev, info.st_ino), found)
        if found is not None:
            raise FilePathError(
                f"{flag} {output} is the same file as {found}, an input of this run; writing "
                f"it would destroy that input: choose another {flag}"
            )


def _same_file(first: Path, second: Path) -> bool:
    try:
        return os.path.samefile(first, second)
    except OSError:  # one of them does not exist (yet)
        return os.path.realpath(first) == os.path.realpath(second)


def _reason(exc: OSError) -> str:
    """``exc`` as a short cause without the path (the caller names it)."""
    return exc.strerror or str(exc) or type(exc).__name__


def atomic_write_bytes(
    path: str | os.PathLike[str], data: bytes, *, mode: int | None = None
) -> Path:
    """Write ``data`` to ``path`` atomically; return the path.

    The parent folder must exist (it is not created: a typo in a folder name
    should fail loudly). ``mode`` sets the permission bits of the new file;
    by default an existing file keeps its bits and a new one gets ``0o644``.
    The target rule (:func:`check_output_path`) is checked first; an ``OSError``
    while writing becomes a ``FilePathError`` naming ``path``.
    """
    given = Path(path)
    target = check_output_path(given)
    if mode is None:
        try:
            mode = target.stat().st_mode & 0o777
        except OSError:
            mode = 0o644
    folder = target.parent if str(target.parent) else Path(".")
    remove_stale_temps(target)
    try:
        fd, tmp_name = _create_temp(folder)
    except OSError as exc:
        raise FilePathError(
            f"cannot write {given}: cannot create a file in folder {folder} ({_reason(exc)})"
        ) from None
    try:
        with os.fdopen(fd, "wb") as handle:
            handle.write(data)
            handle.flush()
            os.fsync(handle.fileno())
        os.chmod(tmp_name, mode)
        os.replace(tmp_name, target)
    except BaseException as exc:
        with contextlib.suppress(OSError):
            os.unlink(tmp_name)
        if isinstance(exc, OSError) and not isinstance(exc, FilePathError):
            raise FilePathError(f"cannot write {given}: {_reason(exc)}") from exc
        raise
    _fsync_folder(folder)
    return given


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
