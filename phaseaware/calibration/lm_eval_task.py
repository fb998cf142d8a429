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
  then ``exact_match`` against ``answer``);
* ``<task>_chat.jsonl`` and ``<task>_chat.yaml``: the same probes for lm-eval's
  chat-API route (``local-chat-completions --apply_chat_template``), where the
  server applies its own chat template and adds BOS itself. lm-eval sends a
  document's ``doc_to_text`` as the one user message's content, so each document
  carries ``content``: the probe's user text, without BOS text and without chat
  template (``prompt`` would put the BOS text and the template's markers into the
  message as content). ``chat_format`` names the format the task was emitted with;
  with a chat format (``hf``, ``chatml``, ``deepseek-v4``...) ``key_position``,
  ``prompt_tokens`` and ``residue`` are where a server rendering that format puts
  them (the completions task's), with ``none`` they are left out (the server's
  template decides). Either way ``score --format lm-eval --chat-format ...`` finds
  the real positions from the logged messages. A format with options (``hf`` and
  DeepSeek's: thinking off) adds the ``chat_template_kwargs`` calibrate's requests
  state (lm-eval sends extra ``generation_kwargs`` in the request body).

Run the completions task with ``lm_eval --include_path DIR --tasks <task>
--log_samples ...`` on a completions backend that sends the prompt as text and
adds no BOS of its own (``local-completions`` with ``tokenized_requests=False``),
or the chat task with ``--tasks <task>_chat --model local-chat-completions
--apply_chat_template`` (see docs/score.md), then read the samples back with
``phaseaware score --format lm-eval``. The YAML is written as JSON-quoted scalars
(valid YAML), so no YAML library is needed.
"""

from __future__ import annotations

import json
import os
from dataclasses import dataclass, replace
from pathlib import Path

from phaseaware.atomic import atomic_write_text, check_output_path, ensure_output_folder
from phaseaware.calibration.probes import Probe, ProbeSettings, iter_groups
from phaseaware.chat.layout import PromptLayout
from phaseaware.endpoints.request_settings import chat_template_kwargs
from phaseaware.errors import CalibrationError
from phaseaware.tokenizers.base import Tokenizer

__all__ = [
    "CHAT_SUFFIX",
    "DEFAULT_TASK",
    "EmittedTask",
    "chat_content",
    "chat_task_name",
    "emit_lm_eval_task",
    "needle_of",
]

DEFAULT_TASK = "phaseaware_phase_sweep"
CHAT_SUFFIX = "_chat"  # the chat-API route's task: <task>_chat
FIRST_NUMBER = r"(\d+)"  # calibrate's grader: the first number of the answer (task.extract_answer)


@dataclass(frozen=True)
class EmittedTask:
    """One written task; ``chat`` is the chat-API route's task written beside it."""

    task: str
    yaml_path: Path
    data_path: Path
    n_docs: int
    chat: EmittedTask | None = None


def chat_task_name(task: str) -> str:
    """The chat-API route's task name for the completions task ``task``."""
    return task + CHAT_SUFFIX


def needle_of(name: str, answer: str) -> str:
    """The needle text of a probe: unique in its prompt (names and numbers are distinct per
    prompt, and the question never states the number); its first token is the key."""
    return f"{name} is {answer}"


def chat_content(probe: Probe, *, bos_text: str) -> str:
    """The user message content lm-eval's chat route sends for ``probe``: the probe's one
    user message (chat formats), or its text after the BOS text (``none``: ``BOS + content``).
    A server renders it with its own template and BOS."""
    if probe.messages is None:
        if not probe.text.startswith(bos_text):
            raise CalibrationError(
                f"probe {probe.probe_id} does not start with the tokenizer's BOS text "
                f"{bos_text!r}; emit the task with a chat format (--chat-format hf)"
            )
        return probe.text[len(bos_text) :]
    users = [m for m in probe.messages if m.get("role") == "user"]
    if len(probe.messages) != 1 or len(users) != 1 or not isinstance(users[0].get("content"), str):
        raise CalibrationError(
            f"probe {probe.probe_id} has {len(probe.messages)} messages; lm-eval's chat route "
            "sends one user message: emit the task with the default conversation"
        )
    return str(users[0]["content"])


def _chat_doc(
    doc: dict[str, object], probe: Probe, *, bos_text: str, chat_format: str
) -> dict[str, object]:
    """The chat route's document for ``probe`` (``doc``: its completions document): the
    message content instead of the rendered prompt. Positions only where a server that
    renders ``chat_format`` puts them (a chat format: the probe's messages render the
    prompt); with ``none`` the server's own template places the key."""
    chat_doc: dict[str, object] = {
        "id": doc["id"],
        "content": chat_content(probe, bos_text=bos_text),
        "answer": doc["answer"],
        "needle": doc["needle"],
        "chat_format": chat_format,
    }
    if probe.messages is not None:
        for field in ("key_position", "prompt_tokens", "residue"):
            chat_doc[field] = doc[field]
    chat_doc["base_index"] = doc["base_index"]
    return chat_doc


def _yaml(
    task: str,
    data_path: Path,
    max_tokens: int,
    *,
    chat: bool = False,
    template_kwargs: dict[str, object] | None = None,
) -> str:
    q = json.dumps
    header = [
        "# Written by phaseaware calibrate --emit-lm-eval-task; the probes of a calibration",
        "# run, graded as calibrate grades them (first number == answer).",
    ]
    if chat:
        header.append(
            "# Chat-API route: lm_eval --model local-chat-completions --apply_chat_template"
        )
    extra = [f"  chat_template_kwargs: {q(template_kwargs)}"] if template_kwargs else []
    return "\n".join(
        [
            *header,
            f"task: {q(task)}",
            'dataset_path: "json"',
            "dataset_kwargs:",
            "  data_files:",
            f"    test: {q(str(data_path))}",
            'test_split: "test"',
            'output_type: "generate_until"',
            f"doc_to_text: {q('content' if chat else 'prompt')}",
            'doc_to_target: "answer"',
            'target_delimiter: ""',
            "num_fewshot: 0",
            "generation_kwargs:",
            '  until: ["\\n"]',
            f"  max_gen_toks: {int(max_tokens)}",
            "  do_sample: false",
            "  temperature: 0.0",
            *extra,
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
    """Write the completions task's YAML and JSONL, and the chat-API route's
    (``<task>_chat``), into ``folder`` (created; every target checked before any is
    written, each written atomically)."""
    key_only = replace(settings, sweeps=("key",))
    lines, chat_lines = [], []
    period = settings.n_offsets
    chat_format = layout.name
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
            chat_doc = _chat_doc(doc, probe, bos_text=tokenizer.bos_text, chat_format=chat_format)
            chat_lines.append(json.dumps(chat_doc, ensure_ascii=False))
    out = Path(folder)
    ensure_output_folder(out, what="--emit-lm-eval-task")
    # Never resolved before the check: a link planted where the data file goes is refused
    # by the safe write's link rules like any other output (the YAML names the path as given).
    data_path = Path(os.path.abspath(out / f"{task}.jsonl"))
    yaml_path = out / f"{task}.yaml"
    chat = chat_task_name(task)
    chat_data_path = Path(os.path.abspath(out / f"{chat}.jsonl"))  # checked as given, too
    chat_yaml_path = out / f"{chat}.yaml"
    for target in (data_path, yaml_path, chat_data_path, chat_yaml_path):
        check_output_path(target)  # every target checked before any is written
    atomic_write_text(data_path, "\n".join(lines) + "\n")
    atomic_write_text(yaml_path, _yaml(task, data_path, settings.max_tokens))
    atomic_write_text(chat_data_path, "\n".join(chat_lines) + "\n")
    kwargs = chat_template_kwargs(chat_format=chat_format)  # what calibrate's requests state
    atomic_write_text(
        chat_yaml_path,
        _yaml(chat, chat_data_path, settings.max_tokens, chat=True, template_kwargs=kwargs),
    )
    chat_task = EmittedTask(chat, chat_yaml_path, chat_data_path, len(chat_lines))
    return EmittedTask(task, yaml_path, data_path, len(lines), chat=chat_task)
