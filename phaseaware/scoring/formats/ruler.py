"""NVIDIA RULER prediction files (``scripts/pred/call_api.py`` output, ``<task>.jsonl``).

Fields, as RULER writes them:

* the data file (``scripts/data/synthetic/niah.py``, ``formatted_output``) holds
  ``index`` (there a *character* offset: ``input_text.find(answer[0])``),
  ``input`` (the prompt without its answer prefix), ``outputs`` (the needle
  values), ``length``, ``answer_prefix`` and ``token_position_answer`` (the
  answer's token count of ``input[:index]`` tokenized alone, without BOS: a
  separate tokenization, not the in-context position, so it is not used here);
* the prediction file (``scripts/pred/call_api.py``, ``outputs_parallel``) holds
  ``index``, ``pred`` (the model's text), ``input`` (``input + answer_prefix``:
  exactly the prompt sent to the completions endpoint), ``outputs``, ``others``,
  ``truncation`` and ``length``. It alone is read.

Correctness follows RULER's ``string_match_all``
(``scripts/eval/synthetic/constants.py``): every needle value appears in
``pred``, case-insensitively. The needle is ``outputs`` (``--needle-field``);
a sample with several values (multi-value tasks) is skipped as
``several-needles``. ``--correct-field`` names a field to use instead. The
prompt is text sent to a completions endpoint, so the server's BOS is counted
(``--server-bos``).
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

from phaseaware.scoring.fields import MISSING, get_path, needle_values
from phaseaware.scoring.formats.common import ReadOptions, files_in, read_jsonl, sample_from
from phaseaware.scoring.sample import EvalSample, Skip

__all__ = ["read"]


def _string_match_all(record: dict[str, object], needle_field: str) -> bool | None:
    pred = record.get("pred")
    raw = get_path(record, needle_field)
    needles = None if raw is MISSING else needle_values(raw)
    if not isinstance(pred, str) or needles is None:
        return None
    return all(n.lower() in pred.lower() for n in needles)


def read(path: Path, options: ReadOptions) -> Iterator[EvalSample | Skip]:
    needle_field = options.needle_field or "outputs"
    for file in files_in(path, "*.jsonl"):
        for where, record in read_jsonl(file, cap=options.line_cap()):
            if isinstance(record, Skip):
                yield record
                continue
            index = record.get("index")
            sample_id = f"{file.name}:index {index}" if isinstance(index, int) else where
            correct_field = options.correct_field
            if correct_field is None:
                verdict = _string_match_all(dict(record), needle_field)
                record = {**record, "_string_match_all": verdict}
                correct_field = "_string_match_all"
            truncation = record.get("truncation")
            yield sample_from(
                record,
                sample_id=sample_id,
                prompt=record.get("input", MISSING),
                needle_field=needle_field,
                correct_field=correct_field,
                pass_at=1.0 if options.pass_at is None else options.pass_at,
                truncated=isinstance(truncation, int) and truncation not in (-1, 0),
            )
