"""Plain JSONL, for any harness without its own reader: one object per line.

Fields: ``prompt`` (the text sent, as is) or ``messages`` (an OpenAI-style
message list, rendered with ``--chat-format`` or by ``--server``), ``needle``
(the needle text as it appears in the prompt; its first token is the key),
``correct`` (boolean, or a number counted correct at ``>= --pass-at``, default
1), optional ``id`` (else ``<file>:<line>``), optional ``prompt_tokens`` (the
server's count, a cross-check).
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

from phaseaware.scoring.fields import MISSING, get_path
from phaseaware.scoring.formats.common import ReadOptions, files_in, read_jsonl, sample_from
from phaseaware.scoring.sample import EvalSample, Skip

__all__ = ["read"]


def read(path: Path, options: ReadOptions) -> Iterator[EvalSample | Skip]:
    for file in files_in(path, "*.jsonl"):
        for where, record in read_jsonl(file, cap=options.line_cap()):
            if isinstance(record, Skip):
                yield record
                continue
            raw_id = record.get("id")
            sample_id = str(raw_id) if isinstance(raw_id, str | int) else where
            prompt = get_path(record, "prompt")
            if prompt is MISSING:
                prompt = get_path(record, "messages")
            yield sample_from(
                record,
                sample_id=sample_id,
                prompt=prompt,
                needle_field=options.needle_field or "needle",
                correct_field=options.correct_field or "correct",
                pass_at=1.0 if options.pass_at is None else options.pass_at,
                reported_tokens=record.get("prompt_tokens"),
            )
