"""lm-evaluation-harness ``--log_samples`` files: ``samples_<task>_<date>.jsonl``.

Fields, as lm-eval writes them (EleutherAI/lm-evaluation-harness,
``lm_eval/evaluator.py``, the ``example`` dict built when ``log_samples``; and
``lm_eval/loggers/evaluation_tracker.py``, ``save_results_samples``, which
renames each request's ``args`` tuple to ``arguments.gen_args_<i>.arg_<j>``):

* ``arguments.gen_args_0.arg_0``: the prompt of the (first) request, the
  rendered context string; for chat APIs (``--apply_chat_template`` with
  ``local-chat-completions``) a ``JsonChatStr`` (``lm_eval/models/api_models.py``,
  ``TemplateAPI.apply_chat_template``: ``JsonChatStr(json.dumps(chat_history))``), a
  NamedTuple that ``json.dumps`` writes as a **one-element list** holding the JSON
  string of the message list; it is unwrapped and rendered here with
  ``--chat-format`` or by ``--server``;
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

A folder is read as one run: lm-eval writes ``<output_path>/<model>/samples_<task>_<date>.jsonl``
(``evaluation_tracker.py``, ``save_results_samples``), and a re-run into the same
``--output_path`` adds another dated file. Files of one task holding the same samples
(``doc_id`` and prompt) are read once, the copies skipped as ``duplicate``; a folder that
mixes models, tasks, or runs whose samples differ is refused with the file to pass instead.
"""

from __future__ import annotations

import hashlib
import re
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from phaseaware.scoring.errors import EvalLogError
from phaseaware.scoring.fields import MISSING, get_path
from phaseaware.scoring.formats.common import ReadOptions, files_in, read_jsonl, sample_from
from phaseaware.scoring.sample import EvalSample, Skip

__all__ = ["read", "PROMPT_FIELD", "NEEDLE_FIELDS"]

PROMPT_FIELD = "arguments.gen_args_0.arg_0"
NEEDLE_FIELDS = ("doc.needle", "doc.outputs")


_SAMPLES_FILE = re.compile(r"samples_(?P<task>.+)_(?P<date>\d{4}-\d{2}-\d{2}T[0-9.:-]+)\.jsonl$")


@dataclass(frozen=True)
class _Run:
    """What a pre-pass over the samples files found: the filter names and, per file, the
    task and the samples it holds (``(doc_id, filter, prompt digest)``)."""

    filters: tuple[str, ...]
    tasks: dict[Path, str]
    samples: dict[Path, frozenset[tuple[object, object, str]]]


def _prompt(record: Mapping[str, Any]) -> Any:
    """The first request's prompt; a chat API's ``JsonChatStr`` (written by ``json.dumps`` as a
    one-element list holding the JSON string of the messages) unwrapped to that string."""
    prompt = get_path(record, PROMPT_FIELD)
    if isinstance(prompt, list) and len(prompt) == 1 and isinstance(prompt[0], str):
        return prompt[0]
    return prompt


def _digest(prompt: Any) -> str:
    text = prompt if isinstance(prompt, str) else repr(prompt)
    return hashlib.sha256(text.encode("utf-8", "surrogatepass")).hexdigest()


def _hashable(value: object) -> object:
    """A log's ``doc_id`` or ``filter`` as a set member: any JSON value (a list, an object)
    becomes its JSON text, so a malformed record is compared, not a crash."""
    return value if value is None or isinstance(value, str | int | float | bool) else repr(value)


def _sample_key(record: Mapping[str, Any]) -> tuple[object, object, str]:
    """What makes a sample the same sample in another samples file of the run."""
    return (
        _hashable(record.get("doc_id")),
        _hashable(record.get("filter")),
        _digest(_prompt(record)),
    )


def _scan(files: list[Path], *, cap: int) -> _Run:
    filters: dict[str, None] = {}
    tasks: dict[Path, str] = {}
    samples: dict[Path, frozenset[tuple[object, object, str]]] = {}
    for file in files:
        match = _SAMPLES_FILE.match(file.name)
        tasks[file] = match.group("task") if match else file.stem
        keys = set()
        for _, record in read_jsonl(file, cap=cap):
            if isinstance(record, Skip):
                continue
            if isinstance(record.get("filter"), str):
                filters[record["filter"]] = None
            keys.add(_sample_key(record))
        samples[file] = frozenset(keys)
    return _Run(tuple(filters), tasks, samples)


def _one_run(path: Path, files: list[Path], run: _Run) -> dict[Path, Path]:
    """Each file that repeats an earlier one's samples, mapped to that earlier file (read once);
    raises when the folder mixes models, tasks or runs (the message names what to pass)."""
    models = sorted({str(f.parent.relative_to(path)) for f in files}) if path.is_dir() else []
    if len(models) > 1:
        raise EvalLogError(
            f"{path} holds samples of several models ({', '.join(models)}); score one model's "
            f"folder, e.g. {path / models[0]}"
        )
    tasks = sorted(set(run.tasks.values()))
    if len(tasks) > 1:
        example = next(f for f in files if run.tasks[f] == tasks[0])
        raise EvalLogError(
            f"{path} holds samples of several tasks ({', '.join(tasks)}); score one task's "
            f"samples file, e.g. {example}"
        )
    repeats: dict[Path, Path] = {}
    first: dict[frozenset[tuple[object, object, str]], Path] = {}
    for file in files:
        held = run.samples[file]
        if held in first:
            repeats[file] = first[held]
        elif first:
            earlier = next(iter(first.values()))
            raise EvalLogError(
                f"{path} holds several runs of {tasks[0]} whose samples differ ({earlier.name}, "
                f"{file.name}); score one samples file, e.g. {file}"
            )
        else:
            first[held] = file
    return repeats


def _filter_name(run: _Run, wanted: str | None) -> str | None:
    names = run.filters
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
    run = _scan(files, cap=options.line_cap())
    repeats = _one_run(path, files, run)
    chosen = _filter_name(run, options.lm_eval_filter)
    for file in files:
        for where, record in read_jsonl(file, cap=options.line_cap()):
            if isinstance(record, Skip):
                yield record
                continue
            if chosen is not None and record.get("filter") != chosen:
                continue  # another filter's copy of the same document (the user chose one)
            doc_id = record.get("doc_id")
            sample_id = f"{file.name}:doc {doc_id}" if isinstance(doc_id, int) else where
            if file in repeats:
                yield Skip(sample_id, "duplicate", f"the same sample as in {repeats[file].name}")
                continue
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
                prompt=_prompt(record),
                needle_field=needle_field,
                correct_field=correct_field,
                pass_at=1.0 if options.pass_at is None else options.pass_at,
            )
