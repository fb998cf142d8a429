"""What every log reader shares: its options, JSONL reading, and turning fields into a sample."""

from __future__ import annotations

import json
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from phaseaware.scoring.errors import EvalLogError
from phaseaware.scoring.fields import MISSING, as_messages, correct_value, get_path, needle_values
from phaseaware.scoring.formats.bounded import (
    budget_message,
    file_kind,
    over_budget,
    parse_json,
    read_regular,
)
from phaseaware.scoring.sample import EvalSample, Skip

__all__ = ["ReadOptions", "read_jsonl", "read_json", "files_in", "sample_from"]


@dataclass(frozen=True)
class ReadOptions:
    """Field overrides (``None``: the format's default) and format-specific inputs.

    ``pass_at``: a numeric correctness value counts as correct at ``>= pass_at``;
    ``contexts``: the NIAH harness's saved-context folder; ``question``: the NIAH
    retrieval question; ``lm_eval_filter``: which lm-eval filter's records to score;
    ``max_line_bytes`` / ``max_document_bytes``: the caps on one JSONL line and one
    JSON document or context file (``None``: :data:`MAX_LINE_BYTES`,
    :data:`MAX_DOCUMENT_BYTES`; ``--max-line-mb``, ``--max-document-mb``).
    """

    needle_field: str | None = None
    correct_field: str | None = None
    pass_at: float | None = None
    contexts: Path | None = None
    question: str | None = None
    lm_eval_filter: str | None = None
    max_line_bytes: int | None = None
    max_document_bytes: int | None = None

    def line_cap(self) -> int:
        return MAX_LINE_BYTES if self.max_line_bytes is None else self.max_line_bytes

    def document_cap(self) -> int:
        return MAX_DOCUMENT_BYTES if self.max_document_bytes is None else self.max_document_bytes


def files_in(path: Path, pattern: str) -> list[Path]:
    """``path`` itself if it is a file, else the files matching ``pattern`` under it (sorted)."""
    if path.is_file():
        return [path]
    if path.is_dir():
        found = sorted(p for p in path.rglob(pattern) if p.is_file())
        if found:
            return found
        raise EvalLogError(f"{path} holds no file matching {pattern!r}; pass the log file itself")
    try:
        mode = path.stat().st_mode
    except OSError:
        raise EvalLogError(f"eval log {path} does not exist; check the path") from None
    raise EvalLogError(
        f"eval log {path} is {file_kind(mode)}, not a regular file; pass the log file itself"
    )


#: The longest line (one sample's record) read; a longer one is skipped without being held.
MAX_LINE_BYTES = 256 * 1024 * 1024
#: The largest single-document log (HELMET, NIAH) or NIAH context file read whole.
MAX_DOCUMENT_BYTES = 1024 * 1024 * 1024
LINE_FLAG = "--max-line-mb"
DOCUMENT_FLAG = "--max-document-mb"
_CHUNK = 1024 * 1024


def _lines(path: Path, cap: int) -> Iterator[bytes | None]:
    """The file's lines (split at ``\n`` only, as JSONL is), one at a time; ``None`` for a
    line over ``cap`` bytes (skipped to its end, never held whole)."""
    try:
        with path.open("rb") as handle:
            while line := handle.readline(cap + 1):
                if len(line) > cap and not line.endswith(b"\n"):
                    while (rest := handle.readline(_CHUNK)) and not rest.endswith(b"\n"):
                        pass
                    yield None
                    continue
                yield line
    except OSError as exc:
        raise EvalLogError(f"cannot read {path}: {exc.strerror or exc}") from None


def read_jsonl(
    path: Path, *, cap: int | None = None
) -> Iterator[tuple[str, Mapping[str, Any] | Skip]]:
    """``(line id, record)`` per non-blank line; a line that is no JSON object is a Skip.

    The file is streamed: memory holds one line, not the log. A line over ``cap`` bytes
    (default :data:`MAX_LINE_BYTES`), or one whose parse would take over
    ``PARSE_FACTOR`` times the cap, is skipped unparsed."""
    cap = MAX_LINE_BYTES if cap is None else cap
    for number, raw in enumerate(_lines(path, cap), start=1):
        where = f"{path.name}:{number}"
        if raw is None:
            yield where, Skip(where, "bad-record", f"line over {cap >> 20} MiB")
            continue
        try:
            line = raw.decode("utf-8")
        except UnicodeDecodeError:
            raise EvalLogError(f"{where} is not UTF-8 text; pass the JSON/JSONL log") from None
        del raw
        if number == 1:
            line = line.removeprefix("\ufeff")  # a UTF-8 BOM starts the file, not the record
        if not line.strip():
            continue
        estimate = over_budget(line, cap=cap)
        if estimate is not None:
            detail = budget_message(estimate, cap=cap, flag=LINE_FLAG)
            yield where, Skip(where, "bad-record", detail)
            continue
        try:
            record = json.loads(line)
        except ValueError:
            yield where, Skip(where, "bad-record", "not JSON")
            continue
        except RecursionError:
            yield where, Skip(where, "bad-record", "JSON nested too deep")
            continue
        if not isinstance(record, Mapping):
            yield where, Skip(where, "bad-record", "not a JSON object")
            continue
        yield where, record


def read_json(path: Path, *, cap: int | None = None) -> Any:
    """One JSON document of at most ``cap`` bytes (default :data:`MAX_DOCUMENT_BYTES`),
    parsed within ``PARSE_FACTOR`` times the cap (raises :class:`EvalLogError` naming
    ``--max-document-mb`` past either, and when the file is not one JSON document)."""
    cap = MAX_DOCUMENT_BYTES if cap is None else cap
    raw = read_regular(path, cap=cap, flag=DOCUMENT_FLAG)
    try:
        text = raw.decode("utf-8-sig")  # a UTF-8 BOM is read, not parsed
    except UnicodeDecodeError:
        raise EvalLogError(f"{path} is not UTF-8 text; pass the JSON/JSONL log") from None
    del raw
    try:
        return parse_json(text, where=str(path), cap=cap, flag=DOCUMENT_FLAG)
    except ValueError as exc:
        raise EvalLogError(f"{path} is not a JSON document ({exc}); check --format") from None
    except RecursionError:
        raise EvalLogError(
            f"{path} is JSON nested too deep to be an eval log; check --format"
        ) from None


def sample_from(
    record: Mapping[str, Any],
    *,
    sample_id: str,
    prompt: Any,
    needle_field: str,
    correct_field: str,
    pass_at: float,
    reported_tokens: Any = None,
    truncated: bool = False,
) -> EvalSample | Skip:
    """A sample from ``record`` (prompt text or messages, needle and verdict), or the Skip."""
    if prompt is MISSING or prompt is None or (isinstance(prompt, str) and not prompt):
        return Skip(sample_id, "no-prompt", "no prompt text or messages in the record")
    messages = as_messages(prompt)
    if messages is None and not isinstance(prompt, str):
        return Skip(sample_id, "bad-record", "the prompt is neither text nor a message list")
    raw_needle = get_path(record, needle_field)
    needles = None if raw_needle is MISSING else needle_values(raw_needle)
    if needles is None:
        return Skip(sample_id, "no-needle", f"field {needle_field!r} missing or not text")
    raw_correct = get_path(record, correct_field)
    correct = None if raw_correct is MISSING else correct_value(raw_correct, pass_at=pass_at)
    if correct is None:
        return Skip(sample_id, "no-verdict", f"field {correct_field!r} missing or not a verdict")
    if reported_tokens is not None and (
        isinstance(reported_tokens, bool) or not isinstance(reported_tokens, int)
    ):
        reported_tokens = None
    return EvalSample(
        sample_id=sample_id,
        prompt=None if messages is not None else prompt,
        messages=messages,
        needles=needles,
        correct=correct,
        reported_tokens=reported_tokens,
        truncated=truncated,
    )
