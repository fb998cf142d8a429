"""The durable calibration log: one JSON object per line, append-only.

Line 1 is the *header* (schema ``phaseaware.calibration-log/v1``): settings,
run fingerprint, tokenizer spec + fingerprint, model and backend names. Every
further line is one completed probe (:class:`ProbeRecord`), written, flushed
and fsynced before the next probe is logged, so a killed run loses at most the
line being written. Reading tolerates a torn *last* line (it is ignored and
cut off before appending); any other damage, a foreign file, or a header from a
different run raises :class:`~phaseaware.errors.LogError` naming the fix.

The header never holds credentials: :func:`open_log` refuses a header that
contains the value of an API-key variable (``API_KEY_ENV_VARS``:
``PHASEAWARE_API_KEY``, ``OPENAI_API_KEY``).

:func:`logged_probe_ids` reads what a resumable log already holds without opening
it for appending (batch emission); it and :func:`open_log` refuse a log of another
run through the same check (:func:`check_same_run`).
"""

from __future__ import annotations

import contextlib
import json
import os
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from phaseaware.atomic import atomic_write_text, check_output_path, ensure_output_folder
from phaseaware.calibration.backends.base import API_KEY_ENV_VARS
from phaseaware.errors import FilePathError, LogError
from phaseaware.filelock import hold_lock
from phaseaware.redact import redact
from phaseaware.userfiles import LARGE_FILE, read_user_bytes

__all__ = [
    "SCHEMA",
    "COMPLETION_CHARS",
    "LogHeader",
    "ProbeRecord",
    "CalibrationLog",
    "read_log",
    "open_log",
    "check_same_run",
    "logged_probe_ids",
]

SCHEMA = "phaseaware.calibration-log/v1"
COMPLETION_CHARS = 200  # completions are truncated to this many characters in the log
_FIX = "pass --log with another file to keep it, or --fresh to start this run over"


@dataclass(frozen=True)
class LogHeader:
    """First line of a log: what was run. ``fingerprint`` identifies the run's settings."""

    fingerprint: str
    settings: dict[str, Any]
    tokenizer_spec: str
    tokenizer_fingerprint: str
    model: str
    backend: str
    created: str
    tool_version: str
    model_info: dict[str, Any] = field(default_factory=dict)

    def to_dict(self) -> dict[str, Any]:
        return {"schema": SCHEMA, **asdict(self)}

    @classmethod
    def from_dict(cls, doc: dict[str, Any], *, source: str) -> LogHeader:
        if not isinstance(doc, dict) or doc.get("schema") != SCHEMA:
            raise LogError(
                f"{source} is not a phaseaware calibration log (no {SCHEMA} header); {_FIX}"
            )
        try:
            return cls(
                fingerprint=str(doc["fingerprint"]),
                settings=dict(doc["settings"]),
                tokenizer_spec=str(doc["tokenizer_spec"]),
                tokenizer_fingerprint=str(doc["tokenizer_fingerprint"]),
                model=str(doc["model"]),
                backend=str(doc["backend"]),
                created=str(doc["created"]),
                tool_version=str(doc["tool_version"]),
                model_info=dict(doc.get("model_info") or {}),
            )
        except (KeyError, TypeError, ValueError) as exc:
            raise LogError(f"{source} has a malformed header ({exc}); {_FIX}") from None


@dataclass(frozen=True)
class ProbeRecord:
    """One completed probe. Positions and lengths are in tokens of the run's tokenizer.

    ``key_position``: absolute index of the target key token (BOS = 0) as the
    model sees it, i.e. phaseaware's count plus the header's
    ``settings["position_offset"]`` (tokens a server adds itself, e.g. BOS);
    ``prompt_tokens``: prompt length, shifted the same way; ``elapsed``: seconds the backend took
    (for a batched group, the group's time divided among its probes).
    """

    probe_id: str
    sweep: str
    base_index: int
    offset: int
    key_position: int
    prompt_tokens: int
    correct: bool
    expected: str
    completion: str
    answer_logprob: float | None
    elapsed: float
    reported_prompt_tokens: int | None = None

    def to_line(self) -> str:
        doc = asdict(self)
        doc["completion"] = self.completion[:COMPLETION_CHARS]
        return json.dumps(doc, sort_keys=True, ensure_ascii=False) + "\n"

    @classmethod
    def from_dict(cls, doc: dict[str, Any]) -> ProbeRecord:
        return cls(
            probe_id=str(doc["probe_id"]),
            sweep=str(doc["sweep"]),
            base_index=int(doc["base_index"]),
            offset=int(doc["offset"]),
            key_position=int(doc["key_position"]),
            prompt_tokens=int(doc["prompt_tokens"]),
            correct=bool(doc["correct"]),
            expected=str(doc.get("expected", "")),
            completion=str(doc.get("completion", "")),
            answer_logprob=None
            if doc.get("answer_logprob") is None
            else float(doc["answer_logprob"]),
            elapsed=float(doc.get("elapsed", 0.0)),
            reported_prompt_tokens=(
                None
                if doc.get("reported_prompt_tokens") is None
                else int(doc["reported_prompt_tokens"])
            ),
        )


def _split_lines(data: bytes) -> tuple[list[bytes], int]:
    """Complete lines of ``data`` and the byte length they cover (a torn tail is dropped)."""
    end = data.rfind(b"\n") + 1
    return data[:end].split(b"\n")[:-1], end  # \n only: JSONL's own line break


def read_log(path: str | os.PathLike[str]) -> tuple[LogHeader, list[ProbeRecord]]:
    """Header and probe records of the log at ``path`` (first record wins per probe id).

    A torn last line is ignored. Raises ``LogError`` for a missing, foreign or
    corrupt file.
    """
    header, records, _ = _read(Path(path))
    return header, records


def _read(path: Path) -> tuple[LogHeader, list[ProbeRecord], int]:
    source = str(path)
    data = read_user_bytes(path, what="calibration log", max_bytes=LARGE_FILE, error=LogError)
    lines, good_end = _split_lines(data)
    if not lines:
        raise LogError(f"{source} is empty or holds no complete header line; {_FIX}")
    try:
        header_doc = json.loads(lines[0])
    except (json.JSONDecodeError, UnicodeDecodeError):
        raise LogError(f"{source} is not a phaseaware calibration log; {_FIX}") from None
    header = LogHeader.from_dict(header_doc, source=source)
    records: list[ProbeRecord] = []
    seen: set[str] = set()
    for number, line in enumerate(lines[1:], start=2):
        if not line.strip():
            continue
        try:
            record = ProbeRecord.from_dict(json.loads(line))
        except (json.JSONDecodeError, UnicodeDecodeError, KeyError, TypeError, ValueError):
            raise LogError(f"{source} line {number} is corrupt; {_FIX}") from None
        if record.probe_id not in seen:
            seen.add(record.probe_id)
            records.append(record)
    return header, records, good_end


class CalibrationLog:
    """An open log, appending one fsynced line per probe. Use as a context manager."""

    def __init__(
        self,
        path: Path,
        header: LogHeader,
        done: list[ProbeRecord],
        *,
        lock: contextlib.ExitStack | None = None,
    ) -> None:
        self.path = path
        self.header = header
        self.done: dict[str, ProbeRecord] = {r.probe_id: r for r in done}
        self._lock = lock or contextlib.ExitStack()
        self._handle = check_output_path(path).open("ab")

    def append(self, record: ProbeRecord) -> None:
        """Write one record durably (flush + fsync). A probe id is logged at most once."""
        if record.probe_id in self.done:
            raise LogError(
                f"probe {record.probe_id} is already in {self.path}; it must not run twice"
            )
        try:
            self._handle.write(record.to_line().encode("utf-8"))
            self._handle.flush()
            os.fsync(self._handle.fileno())
        except OSError as exc:  # a full disk, a quota, a file-size limit, an I/O error
            raise FilePathError(
                f"cannot append to calibration log {self.path}: {exc.strerror or exc}; free "
                "space (or fix the cause) and run the same command again to resume: the "
                "probes logged so far are kept"
            ) from None
        self.done[record.probe_id] = record

    def close(self) -> None:
        if not self._handle.closed:
            with contextlib.suppress(OSError):  # a line a full disk refused: a torn tail
                self._handle.close()
        self._lock.close()

    def __enter__(self) -> CalibrationLog:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def _check_no_secret(text: str) -> None:
    if redact(text) != text:  # URL credentials, bearer tokens, sk- keys
        raise LogError(
            "refusing to write credentials (user:password@ in a URL, or an API key) into a "
            "calibration log; pass them through PHASEAWARE_API_KEY or --api-key-file instead"
        )
    for name in API_KEY_ENV_VARS:
        value = os.environ.get(name)
        if value and len(value) >= 8 and value in text:
            raise LogError(f"refusing to write the value of ${name} into a calibration log")


def open_log(
    path: str | os.PathLike[str], header: LogHeader, *, fresh: bool = False
) -> CalibrationLog:
    """Open ``path`` for this run: create it, resume it, or (``fresh``) start it over.

    Resuming requires the stored header's fingerprint to equal ``header``'s;
    a torn last line is cut off first. Raises ``LogError`` with the fix otherwise.
    The log is locked until it is closed: a second run on it raises ``FileBusyError``.
    """
    target = Path(path)
    header_line = json.dumps(header.to_dict(), sort_keys=True, ensure_ascii=False) + "\n"
    _check_no_secret(header_line)
    ensure_output_folder(target.parent, what="the calibration log")
    check_output_path(target)
    lock = contextlib.ExitStack()
    lock.enter_context(hold_lock(target, what="calibration log"))
    try:
        return _open_locked(target, header, header_line, fresh=fresh, lock=lock)
    except BaseException:
        lock.close()
        raise


def _open_locked(
    target: Path, header: LogHeader, header_line: str, *, fresh: bool, lock: contextlib.ExitStack
) -> CalibrationLog:
    if fresh or not target.exists() or target.stat().st_size == 0:
        atomic_write_text(target, header_line)
        # a new inode: lock it too, so a hard link made to it later shares this run's lock
        lock.enter_context(hold_lock(target, what="calibration log"))
        return CalibrationLog(target, header, [], lock=lock)
    stored, records, good_end = _read(target)
    check_same_run(stored, header, target)
    if good_end < target.stat().st_size:
        with target.open("r+b") as handle:  # drop the torn tail so appends start on a new line
            handle.truncate(good_end)
            handle.flush()
            os.fsync(handle.fileno())
    return CalibrationLog(target, stored, records, lock=lock)


def check_same_run(stored: LogHeader, header: LogHeader, path: str | os.PathLike[str]) -> None:
    """Raise ``LogError`` unless the log at ``path`` (header ``stored``) is ``header``'s run."""
    if stored.fingerprint != header.fingerprint:
        raise LogError(
            f"{path} belongs to a different run (fingerprint {stored.fingerprint[:19]}, "
            f"model {stored.model!r}; this run is {header.fingerprint[:19]}); {_FIX}"
        )


def logged_probe_ids(
    path: str | os.PathLike[str], header: LogHeader, *, fresh: bool = False
) -> set[str]:
    """Ids of the probes the log at ``path`` already holds for ``header``'s run.

    Empty for a missing or empty file, or with ``fresh`` (the run starts over).
    Raises ``LogError`` for a log of another run, as :func:`open_log` does.
    """
    target = Path(path)
    if fresh or not target.exists() or target.stat().st_size == 0:
        return set()
    stored, records = read_log(target)
    check_same_run(stored, header, target)
    return {r.probe_id for r in records}
