"""Reading eval-log files within a size and a memory bound, and NIAH context files safely.

``json.loads`` holds one Python object per JSON value: a document of ``{}`` values takes
about 25 times its size (a 128 MiB HELMET file of them took 12 GB). Before parsing, the
values are counted (every ``{``, ``[``, ``,`` and ``:`` opens at most one value or key; counted inside
strings too, so the count only errs high) and the document is parsed only when its
estimated footprint stays under :data:`PARSE_FACTOR` times the cap plus
:data:`PARSE_FLOOR`; past that it is
refused (a document) or skipped (a line), naming the flag that raises the cap.

Files are opened without blocking and must be regular files: a FIFO or a device is named
for what it is, never read (a FIFO would block forever, ``/dev/zero`` never ends).
"""

from __future__ import annotations

import os
import stat
import sys
from pathlib import Path, PurePosixPath
from typing import Any

from phaseaware.scoring.errors import EvalLogError

__all__ = [
    "PARSE_FACTOR",
    "PARSE_FLOOR",
    "VALUE_BYTES",
    "file_kind",
    "parse_budget",
    "parse_estimate",
    "read_context",
    "read_regular",
]

#: The memory a parse may take, as a multiple of the cap (the text itself included), plus
#: :data:`PARSE_FLOOR` (small records are never refused for being dense).
PARSE_FACTOR = 4
PARSE_FLOOR = 64 << 20
#: Bytes one parsed JSON value may hold at most in CPython (an empty dict: 64, plus the
#: list slot or dict entry that holds it, plus a dict's growth; measured in the tests).
VALUE_BYTES = 128

_KINDS = (
    (stat.S_ISDIR, "a folder"),
    (stat.S_ISFIFO, "a FIFO (named pipe)"),
    (stat.S_ISCHR, "a character device"),
    (stat.S_ISBLK, "a block device"),
    (stat.S_ISSOCK, "a socket"),
)


def file_kind(mode: int) -> str:
    """What a non-regular file is, in words (``"a FIFO (named pipe)"``)."""
    return next((text for test, text in _KINDS if test(mode)), "not a regular file")


def read_regular(path: Path, *, cap: int, flag: str, what: str = "eval log") -> bytes:
    """The bytes of the regular file ``path``, at most ``cap`` of them.

    Raises :class:`EvalLogError` naming ``path`` for a FIFO, device, socket or folder
    (opened without blocking, never read), a file over ``cap`` bytes (naming ``flag``,
    which raises the cap), or an ``OSError``.
    """
    try:
        fd = os.open(path, os.O_RDONLY | getattr(os, "O_NONBLOCK", 0))
    except OSError as exc:
        raise EvalLogError(f"cannot read {what} {path}: {exc.strerror or exc}") from None
    try:
        info = os.fstat(fd)
        if not stat.S_ISREG(info.st_mode):
            raise EvalLogError(
                f"{what} {path} is {file_kind(info.st_mode)}, not a regular file; "
                "pass the file itself"
            )
        os.set_blocking(fd, True)
        data = _read_upto(fd, cap + 1, hint=info.st_size)
    except OSError as exc:
        raise EvalLogError(f"cannot read {what} {path}: {exc.strerror or exc}") from None
    finally:
        os.close(fd)
    if len(data) > cap:
        raise EvalLogError(
            f"{what} {path} is over {_mib(cap)}, the cap on one document; raise it with {flag}"
        )
    return data


def _read_upto(fd: int, limit: int, *, hint: int) -> bytes:
    """At most ``limit`` bytes of ``fd``, read in pieces (``read(limit)`` would reserve
    ``limit`` bytes up front, a GiB for an empty file); ``hint``: the expected size."""
    pieces: list[bytes] = []
    total = 0
    step = max(1 << 16, min(hint + 1, 64 << 20))
    while total < limit:
        piece = os.read(fd, min(step, limit - total))
        if not piece:
            break
        pieces.append(piece)
        total += len(piece)
    return b"".join(pieces)


def parse_estimate(text: str) -> int:
    """An upper estimate of the bytes ``json.loads(text)`` holds: the text, a copy of every
    string in it, and :data:`VALUE_BYTES` per value that may open."""
    values = text.count("{") + text.count("[") + text.count(",") + text.count(":") + 1
    return 2 * sys.getsizeof(text) + VALUE_BYTES * values


def over_budget(text: str, *, cap: int) -> int | None:
    """The estimate when parsing ``text`` would take over :func:`parse_budget` bytes."""
    estimate = parse_estimate(text)
    return estimate if estimate > parse_budget(cap) else None


def parse_budget(cap: int) -> int:
    """The bytes a parse of a document or line under ``cap`` bytes may take."""
    return PARSE_FACTOR * cap + PARSE_FLOOR


def budget_message(estimate: int, *, cap: int, flag: str) -> str:
    return (
        f"parsing it would take about {_mib(estimate)} of memory, over the "
        f"{_mib(parse_budget(cap))} allowed for the {_mib(cap)} cap ({PARSE_FACTOR} x it, plus "
        f"{_mib(PARSE_FLOOR)}; it is many small JSON values); raise the cap with {flag}"
    )


def read_context(folder: Path, name: object, *, cap: int, flag: str) -> str:
    """The NIAH context saved for ``name`` (``<folder>/<name>_context.txt``), as text.

    ``name`` comes from the results file, so it is checked like any untrusted path: a
    string without NUL, not absolute, without ``..``, whose file resolves inside
    ``folder``; the file must be a regular file of at most ``cap`` bytes and UTF-8.
    Raises :class:`EvalLogError` with the reason (the reader turns it into a skip).
    """
    if not isinstance(name, str) or not name or "\x00" in name:
        raise EvalLogError(f"file_name {name!r} is not a file name")
    parts = PurePosixPath(name).parts
    if name.startswith(("/", "\\")) or ".." in parts or "\\" in name:
        raise EvalLogError(f"file_name {name!r} points outside --contexts {folder}")
    path = folder / f"{name}_context.txt"
    root = os.path.realpath(folder)
    real = os.path.realpath(path)
    if os.path.commonpath([root, real]) != root:
        raise EvalLogError(f"context file {path} resolves outside --contexts {folder}")
    if not os.path.lexists(path):
        raise EvalLogError(f"context file {path} is missing")
    data = read_regular(path, cap=cap, flag=flag, what="context file")
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise EvalLogError(
            f"context file {path} is not UTF-8 text (byte {exc.start}); the harness saves UTF-8"
        ) from None


def _mib(size: int) -> str:
    return f"{size / (1 << 20):.0f} MiB" if size >= 1 << 20 else f"{size} bytes"


def parse_json(text: str, *, where: str, cap: int, flag: str) -> Any:
    """``json.loads(text)`` when its estimated memory is within bound; else the error."""
    import json

    estimate = over_budget(text, cap=cap)
    if estimate is not None:
        raise EvalLogError(f"{where}: {budget_message(estimate, cap=cap, flag=flag)}")
    return json.loads(text)
