"""What every log reader shares: its options, JSONL reading, and turning fields into a sample."""

from __future__ import annotations

import json
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from phaseaware.scoring.errors import EvalLogError
from phaseaware.scoring.fields import MISSING, as_messages, correct_value, get_path, needle_values
from phaseaware.scoring.sample import EvalSample, Skip

__all__ = ["ReadOptions", "read_jsonl", "read_json", "files_in", "sample_from"]


@dataclass(frozen=True)
class ReadOptions:
    """Field overrides (``None``: the format's default) and format-specific inputs.

    ``pass_at``: a numeric correctness value counts as correct at ``>= pass_at``;
    ``contexts``: the NIAH harness's saved-context folder; ``question``: the NIAH
    retrieval question; ``lm_eval_filter``: which lm-eval filter's records to score.
    """

    needle_field: str | None = None
    correct_field: str | None = None
    pass_at: float | None = None
    contexts: Path | None = None
    question: str | None = None
    lm_eval_filter: str | None = None


def files_in(path: Path, pattern: str) -> list[Path]:
    """``path`` itself if it is a file, else the files matching ``pattern`` under it (sorted)."""
    if path.is_file():
        return [path]
    if path.is_dir():
        found = sorted(p for p in path.rglob(pattern) if p.is_file())
        if found:
            return found
        raise EvalLogError(f"{path} holds no file matching {pattern!r}; pass the log file itself")
    raise EvalLogError(f"eval log {path} does not exist; check the path")


#: The longest line (one sample's record) read; a longer one is skipped without being held.
MAX_LINE_BYTES = 256 * 1024 * 1024
#: The largest single-document log (HELMET, NIAH) read whole.
MAX_DOCUMENT_BYTES = 1024 * 1024 * 1024
_CHUNK = 1024 * 1024


def _open_text(path: Path) -> str:
    try:
        if path.stat().st_size > MAX_DOCUMENT_BYTES:
            raise EvalLogError(
                f"{path} is over {MAX_DOCUMENT_BYTES >> 20} MiB, more than one eval log "
                "document holds; pass the log itself (JSONL logs are read line by line)"
            )
        return path.read_text(encoding="utf-8-sig")  # a UTF-8 BOM is read, not parsed
    except UnicodeDecodeError:
        raise EvalLogError(f"{path} is not UTF-8 text; pass the JSON/JSONL log") from None
    except OSError as exc:
        raise EvalLogError(f"cannot read {path}: {exc.strerror or exc}") from None


def _lines(path: Path) -> Iterator[bytes | None]:
    """The file's lines (split at ``\n`` only, as JSONL is), one at a time; ``None`` for a
    line over :data:`MAX_LINE_BYTES` (skipped to its end, never held whole)."""
    try:
        with path.open("rb") as handle:
            while line := handle.readline(MAX_LINE_BYTES + 1):
                if len(line) > MAX_LINE_BYTES and not line.endswith(b"\n"):
                    while (rest := handle.readline(_CHUNK)) and not rest.endswith(b"\n"):
                        pass
                    yield None
                    continue
                yield line
    except OSError as exc:
        raise EvalLogError(f"cannot read {path}: {exc.strerror or exc}") from None


def read_jsonl(path: Path) -> Iterator[tuple[str, Mapping[str, Any] | Skip]]:
    """``(line id, record)`` per non-blank line; a line that is no JSON object is a Skip.

    The file is streamed: memory holds one line, not the log."""
    for number, raw in enumerate(_lines(path), start=1):
        where = f"{path.name}:{number}"
        if raw is None:
            yield where, Skip(where, "bad-record", f"line over {MAX_LINE_BYTES >> 20} MiB")
            continue
        try:
            line = raw.decode("utf-8")
        except UnicodeDecodeError:
            raise EvalLogError(f"{where} is not UTF-8 text; pass the JSON/JSONL log") from None
        if number == 1:
            line = line.removeprefix("\ufeff")  # a UTF-8 BOM starts the file, not the record
        if not line.strip():
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


def read_json(path: Path) -> Any:
    """One JSON document (raises :class:`EvalLogError` when it is not one)."""
    try:
        return json.loads(_open_text(path))
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
