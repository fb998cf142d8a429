"""OpenCompass outputs (NeedleBench and any generation dataset): ``--format opencompass``.

Fields, as OpenCompass writes them (open-compass/opencompass):

* ``predictions/<model>/<dataset>.json``: one JSON object keyed by sample index (``"0"``,
  ``"1"``, ...), each ``{"origin_prompt", "prediction", "gold"}``
  (``opencompass/openicl/icl_inferencer/icl_base_inferencer.py``,
  ``GenInferencerOutputHandler.save_results``, dumped by ``write_to_json``).
  ``origin_prompt`` is the prompt as the model received it: a string for a base model, or,
  for a model with a meta template (API and chat models), the list
  ``[{"role": "HUMAN" | "BOT" | "SYSTEM", "prompt": ...}]`` that ``parse_template`` returns;
  it is rendered here, roles mapped to ``user``/``assistant``/``system``, with
  ``--chat-format`` or by ``--server``.
* ``results/<model>/<dataset>.json``: the evaluator's result
  (``opencompass/tasks/openicl_eval.py``, ``OpenICLEvalTask._score``, ``mmengine.dump``);
  per-sample correctness only with ``--dump-eval-details``, as ``details``: one entry per
  sample in index order (``icl_base_evaluator.py``, ``BaseEvaluator.evaluate`` flattens each
  replica's detail into lists). An entry's ``correct`` is used when present, else its
  ``score`` (NeedleBench: 100 or 0), correct at ``>= --pass-at`` (default 100), unless
  ``--correct-field`` names another field of the entry.
* The needle: ``gold`` split as NeedleBench writes it, ``needle + "*" + keyword``
  (``opencompass/datasets/needlebench_v2/origin.py``, ``NeedleBenchOriginDataset.load``, and
  ``NeedleBenchOriginEvaluator.score``, which splits it back); the needle part (its
  surrounding newlines removed) is placed, and ``--key-regex`` can put the key on the
  keyword. A gold without ``*`` is the needle itself; NeedleBench's parallel gold
  (``kw*kw#depth*depth``) names several needles and is skipped as ``several-needles``.

The path is the run folder (the one holding ``predictions/`` and ``results/``), the
``predictions`` folder, one model's folder, or one predictions file. One model at a time:
a folder with several models' predictions is refused with the folder to pass; the datasets
of one model (NeedleBench writes one per length and depth) are scored together.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import Any

from phaseaware.scoring.errors import EvalLogError
from phaseaware.scoring.fields import correct_value
from phaseaware.scoring.formats.common import ReadOptions, read_json
from phaseaware.scoring.sample import EvalSample, Skip

__all__ = ["read", "ROLES", "PASS_AT"]

#: OpenCompass meta-template roles -> chat roles
ROLES = {"HUMAN": "user", "BOT": "assistant", "SYSTEM": "system"}
PASS_AT = 100.0


def _prediction_files(path: Path) -> list[Path]:
    """The predictions files of one model under ``path`` (refused when it holds several)."""
    if path.is_file():
        return [path]
    if not path.is_dir():
        raise EvalLogError(f"eval log {path} does not exist; check the path")
    root = path / "predictions" if (path / "predictions").is_dir() else path
    files = sorted(p for p in root.rglob("*.json") if p.is_file())
    if not files:
        raise EvalLogError(
            f"{path} holds no OpenCompass predictions (predictions/<model>/<dataset>.json)"
        )
    models = sorted({f.parent.name for f in files})
    if len(models) > 1:
        raise EvalLogError(
            f"{path} holds predictions of several models ({', '.join(models)}); score one "
            f"model's folder, e.g. {root / models[0]}"
        )
    return files


def _results_file(predictions: Path) -> Path:
    """``<run>/results/<model>/<dataset>.json`` beside ``<run>/predictions/<model>/...``."""
    model = predictions.parent
    return model.parent.parent / "results" / model.name / predictions.name


def _messages(prompt: Any) -> Any:
    """A meta-template prompt as chat messages; a string (or anything else) as it is."""
    if not isinstance(prompt, list):
        return prompt
    out = []
    for turn in prompt:
        if not isinstance(turn, Mapping) or turn.get("role") not in ROLES:
            return None
        text = turn.get("prompt")
        if not isinstance(text, str):
            return None
        out.append({"role": ROLES[turn["role"]], "content": text})
    return out or None


def _needle(gold: Any) -> tuple[str, ...] | str:
    """The needle from NeedleBench's gold (``needle*keyword``), or a skip reason."""
    if isinstance(gold, list) and len(gold) == 1:
        gold = gold[0]
    if not isinstance(gold, str) or not gold.strip():
        return "no-needle"
    if "#" in gold and "*" in gold:
        return "several-needles"  # NeedleBench parallel: keywords*...#depths*...
    needle = gold.split("*", 1)[0].strip()
    return (needle,) if needle else "no-needle"


def _details(results: Path, *, cap: int) -> list[Any] | str:
    """The per-sample details, or why there are none (the reader then refuses the run)."""
    if not results.is_file():
        return (
            f"no results file {results}: run OpenCompass's evaluation with --dump-eval-details "
            "(per-sample correctness is written there only)"
        )
    doc = read_json(results, cap=cap)
    details = doc.get("details") if isinstance(doc, Mapping) else None
    if isinstance(details, Mapping):
        details = [details[k] for k in sorted(details, key=lambda k: (len(str(k)), str(k)))]
    if not isinstance(details, list):
        return f"{results} holds no per-sample details: evaluate with --dump-eval-details"
    return details


def _verdict(detail: Any, options: ReadOptions) -> bool | None:
    if not isinstance(detail, Mapping):
        return None
    field = options.correct_field or ("correct" if "correct" in detail else "score")
    if field not in detail:
        return None
    pass_at = PASS_AT if options.pass_at is None else options.pass_at
    return correct_value(detail[field], pass_at=pass_at)


def read(path: Path, options: ReadOptions) -> Iterator[EvalSample | Skip]:
    for file in _prediction_files(path):
        doc = read_json(file, cap=options.document_cap())
        if not isinstance(doc, Mapping):
            raise EvalLogError(f"{file} is not an OpenCompass predictions object keyed by index")
        details = _details(_results_file(file), cap=options.document_cap())
        if isinstance(details, str):  # the whole run lacks its verdicts: say how to get them
            raise EvalLogError(details)
        for i, key in enumerate(sorted(doc, key=lambda k: (len(str(k)), str(k)))):
            sample_id = f"{file.parent.name}/{file.name}:{key}"
            record = doc[key]
            if not isinstance(record, Mapping):
                yield Skip(sample_id, "bad-record", "not a JSON object")
                continue
            needle = _needle(record.get("gold"))
            if isinstance(needle, str):
                yield Skip(sample_id, needle, "gold is not NeedleBench's needle*keyword")
                continue
            prompt = _messages(record.get("origin_prompt"))
            if prompt is None or (isinstance(prompt, str) and not prompt):
                yield Skip(sample_id, "no-prompt", "origin_prompt is neither text nor turns")
                continue
            correct = _verdict(details[i], options) if i < len(details) else None
            if correct is None:
                yield Skip(sample_id, "no-verdict", f"no detail {i} with a verdict in results")
                continue
            yield EvalSample(
                sample_id=sample_id,
                prompt=prompt if isinstance(prompt, str) else None,
                messages=None if isinstance(prompt, str) else tuple(prompt),
                needles=needle,
                correct=correct,
            )
