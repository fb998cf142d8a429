"""``calibrate --emit-lm-eval-task``: the task's documents are the calibration run's key-sweep
probes (same prompts, same key positions), each needle occurs once and starts at the key, and
the YAML is a local-only lm-eval task."""

from __future__ import annotations

import json

import pytest

from phaseaware.calibration.probes import ProbeSettings, iter_groups
from phaseaware.chat.layout import conversation_layout
from phaseaware.cli.main import main
from phaseaware.reference import probe_defaults
from phaseaware.tokenizers import load_tokenizer


def test_emitted_docs_are_the_calibration_probes(tmp_path, capsys):
    folder = tmp_path / "task"
    args = ["calibrate", "--period", "8", "--base-prompts", "2", "--emit-lm-eval-task",
            str(folder)]  # fmt: skip
    assert main(args) == 0
    assert "16 probes" in capsys.readouterr().out
    docs = [json.loads(line) for line in (folder / "phaseaware_phase_sweep.jsonl").open()]
    tok = load_tokenizer("reference")
    settings = ProbeSettings(
        n_offsets=8, base_prompts=2, seed=0, max_tokens=12, sweeps=("key",),
        context_tokens=probe_defaults.CONTEXT_TOKENS, distractors=probe_defaults.DISTRACTORS,
        depth=probe_defaults.DEPTH,
    )  # fmt: skip
    layout = conversation_layout(tokenizer=tok, chat_format="hf")
    probes = [p for g in iter_groups(tokenizer=tok, layout=layout, settings=settings)
              for p in g.probes]  # fmt: skip
    assert [(d["id"], d["prompt"], d["key_position"]) for d in docs] == [
        (p.probe_id, p.text, p.key_position) for p in probes
    ]
    assert sorted(d["residue"] for d in docs) == sorted(list(range(8)) * 2)
    for doc in docs:
        text = doc["prompt"]
        assert text.count(doc["needle"]) == 1
        tokens = tok.tokenize(text)
        assert tokens.token_at_char(text.index(doc["needle"])) == doc["key_position"]
        assert len(tokens) == doc["prompt_tokens"]


def test_yaml_is_a_local_lm_eval_task(tmp_path, capsys):
    yaml = pytest.importorskip("yaml")
    folder = tmp_path / "task"
    assert main(["calibrate", "--base-prompts", "1", "--emit-lm-eval-task", str(folder)]) == 0
    capsys.readouterr()
    config = yaml.safe_load((folder / "phaseaware_phase_sweep.yaml").read_text())
    assert config["dataset_path"] == "json"
    data = config["dataset_kwargs"]["data_files"]["test"]
    assert data == str((folder / "phaseaware_phase_sweep.jsonl").resolve())
    assert config["output_type"] == "generate_until"
    assert config["doc_to_text"] == "prompt" and config["doc_to_target"] == "answer"
    assert config["filter_list"][0]["filter"][0]["regex_pattern"] == r"(\d+)"
