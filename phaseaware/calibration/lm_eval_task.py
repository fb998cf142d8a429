"""The calibration protocol as an lm-evaluation-harness task: YAML plus a local JSONL dataset.

``phaseaware calibrate --emit-lm-eval-task DIR`` writes, into ``DIR``:

* ``<task>.jsonl``: one document per key-sweep probe of
  :mod:`phaseaware.calibration.probes` (same seed, same prompts, so the same key
  positions as a ``calibrate`` run with these settings): ``id``, ``prompt`` (the
  full rendered text, BOS and chat template included), ``answer``, ``needle``
  (``"<name> is <answer>"``: found once in the prompt, its first token is the
  probe's key, the asked name's first token), ``key_position`` and
  ``prompt_tokens`` (phaseaware's count, absolute, BOS = 0), ``residue`` and
  ``base_index``;
* ``<task>.yaml``: a ``generate_until`` task over that file (lm-eval's ``json``
  dataset builder, ``data_files`` an absolute path: nothing is downloaded),
  greedy, ``max_gen_toks`` = the probe settings' ``max_tokens``, graded as
  ``calibrate`` grades (the first number of the answer, lm-eval's ``regex`` filter,
  then ``exact_match`` against ``answer``).

Run it with ``lm_eval --include_path DIR --tasks <task> --log_samples ...`` on a
completions backend that sends the prompt as text and adds no BOS of its own
(``local-completions`` with ``tokenized_requests=False``; see docs/score.md),
then read the samples back with ``phaseaware score --format lm-eval``. The YAML
is written as JSON-quoted scalars (valid YAML), so no YAML library is needed.
"""

from __future__ import annotations

import json
import os
from dataclasses import dataclass, replace
from pathlib import Path

from phaseaware.atomic import atomic_write_text, check_output_path, ensure_output_folder
from phaseaware.calibration.probes import ProbeSettings, iter_groups
from phaseaware.chat.layout import PromptLayout
from phaseaware.tokenizers.base import Tokenizer

__all__ = ["DEFAULT_TASK", "EmittedTask", "emit_lm_eval_task", "needle_of"]

DEFAULT_TASK = "phaseaware_phase_sweep"
FIRST_NUMBER = r"(\d+)"  # calibrate's grader: the first number of the answer (task.extract_answer)


@dataclass(frozen=True)
class EmittedTask:
    task: str
    yaml_path: Path
    data_path: Path
    n_docs: int


def needle_of(name: str, answer: str) -> str:
    """The needle text of a probe: unique in its prompt (names and numbers are distinct per
    prompt, and the question never states the number); its first token is the key."""
    return f"{name} is {answer}"


def _yaml(task: str, data_path: Path, max_tokens: int) -> str:
    q = json.dumps
    return "\n".join(
        [
            "# Written by phaseaware calibrate --emit-lm-eval-task; the probes of a calibration",
            "# run, graded as calibrate grades them (first number == answer).",
            f"task: {q(task)}",
            'dataset_path: "json"',
            "dataset_kwargs:",
            "  data_files:",
            f"    test: {q(str(data_path))}",
            'test_split: "test"',
            'output_type: "generate_until"',
            'doc_to_text: "prompt"',
            'doc_to_target: "answer"',
            'target_delimiter: ""',
            "num_fewshot: 0",
            "generation_kwargs:",
            '  until: ["\\n"]',
            f"  max_gen_toks: {int(max_tokens)}",
            "  do_sample: false",
            "  temperature: 0.0",
            "filter_list:",
            '  - name: "first-number"',
            "    filter:",
            '      - function: "regex"',
            f"        regex_pattern: {q(FIRST_NUMBER)}",
            "        group_select: 0",
            '        fallback: "[no number]"',
            '      - function: "take_first"',
            "metric_list:",
            '  - metric: "exact_match"',
            '    aggregation: "mean"',
            "    higher_is_better: true",
            "metadata:",
            "  version: 1.0",
            "",
        ]
    )


def emit_lm_eval_task(
    folder: str | os.PathLike[str],
    *,
    tokenizer: Tokenizer,
    layout: PromptLayout,
    settings: ProbeSettings,
    task: str = DEFAULT_TASK,
) -> EmittedTask:
    """Write the task's YAML and JSONL into ``folder`` (created; files written atomically)."""
    key_only = replace(settings, sweeps=("key",))
    lines = []
    period = settings.n_offsets
    for group in iter_groups(tokenizer=tokenizer, layout=layout, settings=key_only):
        for probe in group.probes:
            doc = {
                "id": probe.probe_id,
                "prompt": probe.text,
                "answer": probe.answer,
                "needle": needle_of(probe.target_name, probe.answer),
                "key_position": probe.key_position,
                "prompt_tokens": probe.prompt_tokens,
                "residue": probe.key_position % period,
                "base_index": probe.base_index,
            }
            lines.append(json.dumps(doc, ensure_ascii=False))
    out = Path(folder)
    ensure_output_folder(out, what="--emit-lm-eval-task")
    # Never resolved before the check: a link planted where the data file goes is refused
    # by the safe write's link rules like any other output (the YAML names the path as given).
    data_path = Path(os.path.abspath(out / f"{task}.jsonl"))
    yaml_path = out / f"{task}.yaml"
    check_output_path(data_path)  # both targets checked before either is written
    check_output_path(yaml_path)
    atomic_write_text(data_path, "\n".join(lines) + "\n")
    atomic_write_text(yaml_path, _yaml(task, data_path, settings.max_tokens))
    return EmittedTask(task, yaml_path, data_path, len(lines))
