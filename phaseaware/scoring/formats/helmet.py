"""HELMET output files (``eval.py``, ``run_test``: ``<dataset>_..._<seed>.json``).

Fields, as HELMET writes them (princeton-nlp/HELMET): the file is one JSON
document ``{"args", "data", "metrics", "averaged_metrics", ...}``; each entry of
``data`` is the test item merged with the model's output (``eval.py``,
``result = {**test_item, **output}``), where ``model_utils.py``
(``LLM.generate``'s docstring and the API models) defines

* ``input_text``: the prompt, a string or a chat message list;
* ``output``: the generated text; ``input_len``: the prompt's length in tokens
  as the model or server counted it (the API models read
  ``usage.prompt_tokens``), used here as a cross-check of the tokenizer's count;

and the dataset's ``post_process`` (``data.py``) adds its metrics, e.g.
``ruler_recall`` (RULER tasks) or ``substring_exact_match`` / ``exact_match``
(JSON KV and QA tasks), and the item keeps its ``answer`` (the needle values).
The needle is ``answer`` (``--needle-field``); correctness is the first of
``ruler_recall``, ``substring_exact_match``, ``exact_match`` present, correct at
``>= --pass-at`` (default 1), unless ``--correct-field`` names another.

HELMET's local backends do not log the prompt they sent: ``model_utils.py`` stores
``decode(first 500 tokens) + " <skip> " + decode(last 500 tokens)`` as ``input_text``
(``HFModel.generate`` always; ``VLLMModel.generate`` and ``SGLangModel.generate`` when the
prompt is over 1,000 tokens). Such a sample cannot be placed (the middle, where the needle
usually sits, is gone); it is skipped as ``prompt-cut`` with the fix: run HELMET's API path
(``input_text`` is then the prompt sent) or its vLLM backend with prompts under 1,000 tokens.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from pathlib import Path

from phaseaware.scoring.errors import EvalLogError
from phaseaware.scoring.formats.common import ReadOptions, files_in, read_json, sample_from
from phaseaware.scoring.sample import EvalSample, Skip

__all__ = ["read", "CORRECT_FIELDS", "CUT_MARK", "CUT_REASON"]

CORRECT_FIELDS = ("ruler_recall", "substring_exact_match", "exact_match")
#: what HELMET's local backends put between the first and last 500 tokens they log
CUT_MARK = " <skip> "
CUT_REASON = (
    "HELMET logged the first and last 500 tokens joined by ' <skip> ' (its HF backend always, "
    "vLLM/SGLang above 1,000 tokens), not the prompt sent; re-run with HELMET's API path "
    "(which logs the prompt sent) or its vLLM backend under 1,000 tokens"
)


def read(path: Path, options: ReadOptions) -> Iterator[EvalSample | Skip]:
    for file in files_in(path, "*.json"):
        doc = read_json(file, cap=options.document_cap())
        entries = doc.get("data") if isinstance(doc, Mapping) else None
        if not isinstance(entries, list):
            raise EvalLogError(f"{file} has no 'data' list: not a HELMET output file")
        for i, record in enumerate(entries):
            where = f"{file.name}:data {i}"
            if not isinstance(record, Mapping):
                yield Skip(where, "bad-record", "not a JSON object")
                continue
            raw_id = record.get("id", record.get("qid"))
            sample_id = f"{file.name}:{raw_id}" if isinstance(raw_id, str | int) else where
            prompt = record.get("input_text")
            if isinstance(prompt, str) and prompt.count(CUT_MARK) == 1:
                yield Skip(sample_id, "prompt-cut", CUT_REASON)
                continue
            correct_field = options.correct_field or next(
                (f for f in CORRECT_FIELDS if f in record), CORRECT_FIELDS[0]
            )
            yield sample_from(
                record,
                sample_id=sample_id,
                prompt=prompt,
                needle_field=options.needle_field or "answer",
                correct_field=correct_field,
                pass_at=1.0 if options.pass_at is None else options.pass_at,
                reported_tokens=record.get("input_len"),
            )
