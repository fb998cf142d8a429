"""The one way phaseaware reads a file a user named: regular files only, size-capped.

``read_user_bytes`` refuses folders, FIFOs, devices (``/dev/zero``), sockets and
symlink loops, and files over ``max_bytes``, each with one clear message; it
never blocks (the file is opened ``O_NONBLOCK`` and checked with ``fstat`` before
any read). ``read_user_text`` adds strict UTF-8. ``parse_json_document`` parses
JSON with duplicate keys, NaN/Infinity, nesting deeper than ``MAX_DEPTH``,
integers over ``MAX_INT_DIGITS`` digits and lone surrogates rejected. Every
failure raises ``error`` (a ``PhaseawareError`` subclass, default ``InputError``).
"""

from __future__ import annotations

import errno
import json
import os
import stat
from typing import Any

from phaseaware.errors import InputError, PhaseawareError

__all__ = [
    "LARGE_FILE",
    "MAX_BYTES",
    "MAX_DEPTH",
    "MAX_INT_DIGITS",
    "parse_json_document",
    "read_user_bytes",
    "read_user_text",
    "jsonl_lines",
]

MAX_BYTES = 64 * 1024 * 1024  # request, profile and prompt files
LARGE_FILE = 4 * 1024 * 1024 * 1024  # calibration logs and batch results
MAX_DEPTH = 64
MAX_INT_DIGITS = 30


def read_user_bytes(
    path: str | os.PathLike[str],
    *,
    what: str = "file",
    max_bytes: int = MAX_BYTES,
    error: type[PhaseawareError] = InputError,
) -> bytes:
    """The bytes of the regular file ``path`` (``error`` naming ``what`` otherwise)."""
    name = os.fspath(path)
    try:
        fd = os.open(name, os.O_RDONLY | getattr(os, "O_NONBLOCK", 0))
    except OSError as exc:
        raise error(_open_message(what, name, exc)) from None
    try:
        info = os.fstat(fd)
        if stat.S_ISDIR(info.st_mode):
            raise error(f"{what} {name} is a folder; pass a file")
        if not stat.S_ISREG(info.st_mode):
            raise error(
                f"{what} {name} is not a regular file (a FIFO, device or socket); "
                "save the content to a file and pass that"
            )
        if info.st_size > max_bytes:
            raise error(
                f"{what} {name} is {info.st_size} bytes, over the {max_bytes}-byte limit; "
                "pass a smaller file"
            )
        chunks: list[bytes] = []
        total = 0
        while True:
            block = os.read(fd, 1 << 20)
            if not block:
                break
            total += len(block)
            if total > max_bytes:
                raise error(f"{what} {name} grew past the {max_bytes}-byte limit while read")
            chunks.append(block)
        return b"".join(chunks)
    except OSError as exc:
        raise error(f"cannot read {what} {name}: {exc.strerror or exc}") from None
    finally:
        os.close(fd)


def _open_message(what: str, name: str, exc: OSError) -> str:
    if exc.errno == errno.ENOENT:
        return f"cannot read {what} {name}: it does not exist; check the path"
    if exc.errno == errno.ELOOP:
        return f"{what} {name} is a symlink loop; point it at a real file"
    if exc.errno == errno.EISDIR:
        return f"{what} {name} is a folder; pass a file"
    if exc.errno == errno.EACCES:
        return f"{what} {name} is not readable (permission denied); check its permissions"
    return f"cannot open {what} {name}: {exc.strerror or exc}"


def read_user_text(
    path: str | os.PathLike[str],
    *,
    what: str = "file",
    max_bytes: int = MAX_BYTES,
    error: type[PhaseawareError] = InputError,
) -> str:
    """``read_user_bytes`` decoded as strict UTF-8."""
    data = read_user_bytes(path, what=what, max_bytes=max_bytes, error=error)
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise error(
            f"{what} {os.fspath(path)} is not UTF-8 text (not valid UTF-8 at byte "
            f"{exc.start}); save it as UTF-8"
        ) from None


class _Reject(ValueError):
    pass


def jsonl_lines(data: str) -> list[str]:
    """The lines of JSONL ``data``: split at ``\n`` only, a ``\r`` before it dropped.

    Never ``str.splitlines``: it also breaks at U+2028, U+2029, U+0085 and other
    characters that are valid, unescaped, inside JSON strings (``json.dumps(...,
    ensure_ascii=False)`` writes them as they are). A final line without ``\n`` is kept.
    """
    lines = data.split("\n")
    if lines and lines[-1] == "":
        lines.pop()
    return [line[:-1] if line.endswith("\r") else line for line in lines]


def _reject_constant(name: str) -> Any:
    raise _Reject(f"{name} is not allowed (use a finite number or null)")


def _pairs(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for key, value in pairs:
        if key in out:
            raise _Reject(f"duplicate key {key!r}")
        out[key] = value
    return out


def _parse_int(text: str) -> int:
    if len(text.lstrip("-")) > MAX_INT_DIGITS:
        raise _Reject(f"integer with {len(text.lstrip('-'))} digits is too large")
    return int(text)


def _parse_float(text: str) -> float:
    value = float(text)
    if value in (float("inf"), float("-inf")):
        raise _Reject(f"number {text[:20]}... is too large for a float")
    return value


def _depth_ok(text: str) -> bool:
    """Bracket depth (outside strings) at most ``MAX_DEPTH``; cheap pre-check."""
    depth = 0
    in_string = escaped = False
    for char in text:
        if in_string:
            if escaped:
                escaped = False
            elif char == "\\":
                escaped = True
            elif char == '"':
                in_string = False
        elif char == '"':
            in_string = True
        elif char in "[{":
            depth += 1
            if depth > MAX_DEPTH:
                return False
        elif char in "]}":
            depth -= 1
    return True


def _check_strings(doc: Any) -> None:
    """Raise ``_Reject`` on a lone surrogate in any key or string (iterative walk)."""
    stack = [doc]
    while stack:
        item = stack.pop()
        if isinstance(item, str):
            try:
                item.encode("utf-8")
            except UnicodeEncodeError:
                raise _Reject(
                    f"string {item[:30]!r} holds a lone surrogate (\\ud800-\\udfff)"
                ) from None
        elif isinstance(item, dict):
            stack.extend(item.keys())
            stack.extend(item.values())
        elif isinstance(item, list):
            stack.extend(item)


def parse_json_document(
    text: str, *, source: str, error: type[PhaseawareError] = InputError, hint: str = ""
) -> Any:
    """Parse ``text`` strictly; ``error`` names ``source`` (and ``hint``, the fix)."""
    suffix = f"; {hint}" if hint else ""
    if not _depth_ok(text):
        raise error(f"{source} is nested deeper than {MAX_DEPTH} levels{suffix}")
    try:
        doc = json.loads(
            text,
            parse_constant=_reject_constant,
            object_pairs_hook=_pairs,
            parse_int=_parse_int,
            parse_float=_parse_float,
        )
        _check_strings(doc)
    except json.JSONDecodeError as exc:
        raise error(f"{source} is not valid JSON (line {exc.lineno}: {exc.msg}){suffix}") from None
    except (_Reject, ValueError, RecursionError) as exc:
        raise error(f"{source} is not valid: {exc}{suffix}") from None
    return doc
