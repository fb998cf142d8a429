"""The durable compare log: one JSON object per line, append-only, resumable.

Line 1 is the header (schema ``phaseaware.compare-log/v1``): the run's settings
and their fingerprint (questions, tokenizer, chat format, profile, budget,
model, backend, generation length). Every further line is one answered
(question, arrangement) pair (:class:`AnswerRecord`), flushed and fsynced before
the next, so a killed run loses at most the line being written; running the
same command again resumes. A torn last line is cut off; a log of another run,
a foreign file or a corrupt line raises :class:`~phaseaware.errors.LogError`
naming the fix. Completions are stored whole, so grading happens when the
report is made (another ``--grader`` re-grades the same answers, no request).
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from phaseaware.atomic import atomic_write_text, check_output_path, ensure_output_folder
from phaseaware.errors import LogError
from phaseaware.filelock import hold_lock
from phaseaware.userfiles import LARGE_FILE, read_user_bytes

__all__ = ["SCHEMA", "CompareHeader", "AnswerRecord", "CompareLog", "open_compare_log"]

SCHEMA = "phaseaware.compare-log/v1"
_FIX = "pass --log with another file to keep it, or --fresh to start this comparison over"


def fingerprint(settings: dict[str, Any]) -> str:
    """``sha256:<hex>`` of the canonical settings: equal iff the same comparison."""
    canonical = json.dumps(settings, sort_keys=True, separators=(",", ":"))
    return "sha256:" + hashlib.sha256(canonical.encode("utf-8")).hexdigest()


def _same_comparison(stored: dict[str, Any], expected: str) -> bool:
    """The stored header is the comparison fingerprinted ``expected``. Headers written
    before the controls listed the arrangements in their settings (and fingerprinted
    them); the arrangements are no identity, so such a header counts without them."""
    if stored.get("fingerprint") == expected:
        return True
    settings = stored.get("settings")
    if not isinstance(settings, dict) or "arrangements" not in settings:
        return False
    return fingerprint({k: v for k, v in settings.items() if k != "arrangements"}) == expected


@dataclass(frozen=True)
class CompareHeader:
    fingerprint: str
    settings: dict[str, Any]
    created: str
    tool_version: str

    def to_dict(self) -> dict[str, Any]:
        return {"schema": SCHEMA, **asdict(self)}


@dataclass(frozen=True)
class AnswerRecord:
    """One answered (question, arrangement). Token counts are the prompt's, measured;
    ``evidence_residue``: the top evidence's first key token mod the profile's period
    (``None``: it has no key or was dropped); ``dropped``: chunks the budget left out."""

    question_id: str
    arrangement: str
    completion: str
    prompt_tokens: int
    padding_tokens: int
    repeated_tokens: int
    context_tokens: int
    dropped: int
    evidence_residue: int | None
    expected_accuracy: float | None
    reported_prompt_tokens: int | None
    elapsed: float

    @property
    def key(self) -> tuple[str, str]:
        return (self.question_id, self.arrangement)

    def to_line(self) -> str:
        return json.dumps(asdict(self), sort_keys=True, ensure_ascii=False) + "\n"

    @classmethod
    def from_dict(cls, doc: dict[str, Any]) -> AnswerRecord:
        def optional(name: str, kind: type) -> Any:
            value = doc.get(name)
            return None if value is None else kind(value)

        return cls(
            question_id=str(doc["question_id"]),
            arrangement=str(doc["arrangement"]),
            completion=str(doc["completion"]),
            prompt_tokens=int(doc["prompt_tokens"]),
            padding_tokens=int(doc["padding_tokens"]),
            repeated_tokens=int(doc["repeated_tokens"]),
            context_tokens=int(doc["context_tokens"]),
            dropped=int(doc["dropped"]),
            evidence_residue=optional("evidence_residue", int),
            expected_accuracy=optional("expected_accuracy", float),
            reported_prompt_tokens=optional("reported_prompt_tokens", int),
            elapsed=float(doc.get("elapsed", 0.0)),
        )


def _read(path: Path) -> tuple[dict[str, Any], list[AnswerRecord], int]:
    data = read_user_bytes(path, what="compare log", max_bytes=LARGE_FILE, error=LogError)
    good_end = data.rfind(b"\n") + 1
    lines = data[:good_end].split(b"\n")[:-1]  # \n only: JSONL's own line break
    try:
        header = json.loads(lines[0]) if lines else None
    except (json.JSONDecodeError, UnicodeDecodeError):
        header = None
    if not isinstance(header, dict) or header.get("schema") != SCHEMA:
        raise LogError(f"{path} is not a phaseaware compare log (no {SCHEMA} header); {_FIX}")
    records: dict[tuple[str, str], AnswerRecord] = {}
    for number, line in enumerate(lines[1:], start=2):
        if not line.strip():
            continue
        try:
            record = AnswerRecord.from_dict(json.loads(line))
        except (json.JSONDecodeError, UnicodeDecodeError, KeyError, TypeError, ValueError):
            raise LogError(f"{path} line {number} is corrupt; {_FIX}") from None
        records.setdefault(record.key, record)
    return header, list(records.values()), good_end


class CompareLog:
    """An open compare log (locked), appending one fsynced line per answer."""

    def __init__(self, path: Path, done: list[AnswerRecord], lock: contextlib.ExitStack) -> None:
        self.path = path
        self.done: dict[tuple[str, str], AnswerRecord] = {r.key: r for r in done}
        self._lock = lock
        self._handle = check_output_path(path).open("ab")

    def append(self, record: AnswerRecord) -> None:
        if record.key in self.done:
            raise LogError(f"{record.key} is already in {self.path}; it must not run twice")
        self._handle.write(record.to_line().encode("utf-8"))
        self._handle.flush()
        os.fsync(self._handle.fileno())
        self.done[record.key] = record

    def close(self) -> None:
        if not self._handle.closed:
            self._handle.close()
        self._lock.close()

    def __enter__(self) -> CompareLog:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def open_compare_log(
    path: str | os.PathLike[str], header: CompareHeader, *, fresh: bool = False
) -> CompareLog:
    """Create, resume or (``fresh``) restart the log at ``path`` for ``header``'s run."""
    target = Path(path)
    ensure_output_folder(target.parent, what="the compare log")
    check_output_path(target)
    lock = contextlib.ExitStack()
    lock.enter_context(hold_lock(target, what="compare log"))
    try:
        if fresh or not target.exists() or target.stat().st_size == 0:
            line = json.dumps(header.to_dict(), sort_keys=True, ensure_ascii=False) + "\n"
            atomic_write_text(target, line)
            return CompareLog(target, [], lock)
        stored, records, good_end = _read(target)
        if not _same_comparison(stored, header.fingerprint):
            raise LogError(
                f"{target} belongs to a different comparison (other questions, model, "
                f"profile or settings); {_FIX}"
            )
        if good_end < target.stat().st_size:
            with target.open("r+b") as handle:  # drop a torn tail: appends start on a new line
                handle.truncate(good_end)
                handle.flush()
                os.fsync(handle.fileno())
        return CompareLog(target, records, lock)
    except BaseException:
        lock.close()
        raise
