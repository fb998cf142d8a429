"""lm-evaluation-harness ``--log_samples`` files: ``samples_<task>_<date>.jsonl``.

Fields, as lm-eval writes them (EleutherAI/lm-evaluation-harness,
``lm_eval/evaluator.py``, the ``example`` dict built when ``log_samples``; and
``lm_eval/loggers/evaluation_tracker.py``, ``save_results_samples``, which
renames each request's ``args`` tuple to ``arguments.gen_args_<i>.arg_<j>``):

* ``arguments.gen_args_0.arg_0``: the prompt of the (first) request, the
  rendered context string; for chat APIs (``--apply_chat_template`` with
  ``local-chat-completions``) a JSON string of the message list
  (``JsonChatStr``), rendered here with ``--chat-format`` or by ``--server``;
* ``doc``: the task document: the needle is read from ``--needle-field``,
  default ``doc.needle`` (the phase-sweep task ``calibrate --emit-lm-eval-task``
  writes) or else ``doc.outputs`` (lm-eval's RULER tasks keep the needle values
  there);
* ``metrics``: the names of the per-sample metrics, each stored as a top-level
  field of the record (``exact_match: 1.0``); correctness is the first one
  listed whose value is not ``-1``, counted correct at ``>= --pass-at``
  (default 1), unless ``--correct-field`` names another. lm-eval's RULER tasks
  name one metric per sequence length and set every length but the sample's own
  to ``-1`` (``lm_eval/tasks/ruler/common_utils.py``, ``process_results``; their
  ``aggregate_metrics`` drops the ``-1`` values the same way);
* ``doc_id`` and ``filter``: lm-eval writes one record per document and
  filter; a log with several filters needs ``--lm-eval-filter``.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import Any

from phaseaware.scoring.errors import EvalLogError
from phaseaware.scoring.fields import MISSING, get_path
from phaseaware.scoring.formats.common import ReadOptions, files_in, read_jsonl, sample_from
from phaseaware.scoring.sample import EvalSample, Skip

__all__ = ["read", "PROMPT_FIELD", "NEEDLE_FIELDS"]

PROMPT_FIELD = "arguments.gen_args_0.arg_0"
NEEDLE_FIELDS = ("doc.needle", "doc.outputs")


def _filter_name(files: list[Path], wanted: str | None, *, cap: int) -> str | None:
    names: dict[str, None] = {}
    for file in files:
        for _, record in read_jsonl(file, cap=cap):
            if not isinstance(record, Skip) and isinstance(record.get("filter"), str):
                names[record["filter"]] = None
    if wanted is not None:
        if wanted not in names:
            raise EvalLogError(
                f"--lm-eval-filter {wanted!r} is not in the log; it holds "
                f"{', '.join(names) or 'no filter names'}"
            )
        return wanted
    if len(names) > 1:
        raise EvalLogError(
            f"the log holds records of several lm-eval filters ({', '.join(names)}); "
            "choose one with --lm-eval-filter"
        )
    return None


def _metric_name(record: Mapping[str, Any]) -> str | None:
    """The first metric listed in ``metrics`` whose value is not ``-1`` (RULER's "not this
    length"), or ``None``."""
    metrics = record.get("metrics")
    if not isinstance(metrics, list):
        return None
    for name in metrics:
        if isinstance(name, str) and name in record and record[name] != -1:
            return name
    return None


def read(path: Path, options: ReadOptions) -> Iterator[EvalSample | Skip]:
    files = files_in(path, "samples_*.jsonl")
    chosen = _filter_name(files, options.lm_eval_filter, cap=options.line_cap())
    for file in files:
        for where, record in read_jsonl(file, cap=options.line_cap()):
            if isinstance(record, Skip):
                yield record
                continue
            if chosen is not None and record.get("filter") != chosen:
                continue  # another filter's copy of the same document (the user chose one)
            doc_id = record.get("doc_id")
            sample_id = f"{file.name}:doc {doc_id}" if isinstance(doc_id, int) else where
            needle_field = options.needle_field or next(
                (f for f in NEEDLE_FIELDS if get_path(record, f) is not MISSING), NEEDLE_FIELDS[0]
            )
            correct_field = options.correct_field
            if correct_field is None:
                correct_field = _metric_name(record)
                if correct_field is None:
                    yield Skip(sample_id, "no-verdict", "the record lists no metric with a value")
                    continue
            yield sample_from(
                record,
                sample_id=sample_id,
                prompt=get_path(record, PROMPT_FIELD),
                needle_field=needle_field,
                correct_field=correct_field,
                pass_at=1.0 if options.pass_at is None else options.pass_at,
            )
