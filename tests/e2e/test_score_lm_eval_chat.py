"""lm-evaluation-harness's chat-API route, end to end, against the real reference model.

``phaseaware calibrate --emit-lm-eval-task`` (the default chat format, ``hf``: the reference
model's own template) writes two tasks over the same probes, and a real ``lm_eval`` 0.4.13 (its
own process) runs each, as emitted, against ``serve-reference``: ``phaseaware_phase_sweep``
through ``local-completions`` (the full rendered prompt sent as text) and
``phaseaware_phase_sweep_chat`` through ``local-chat-completions --apply_chat_template`` (each
document's ``content``, the probe's user text without BOS text or template, sent as the user
message and rendered by the server's chat template). lm-eval logs the chat route's prompt as a
``JsonChatStr``, which ``json.dumps`` writes as a one-element list. ``phaseaware score
--format lm-eval`` must place every sample of both runs, the chat run's keys exactly where the
server's own tokenization of the chat (``ReferenceEngine.encode_chat``) puts them, and the two
runs must agree: the same documents graded, each key at the same position and in a prompt of
the same length (the server's template renders the content back into the completions prompt).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from phaseaware.cli.main import main

pytest.importorskip("torch")
pytest.importorskip("transformers")
pytest.importorskip("lm_eval")
pytest.importorskip("aiohttp")  # lm-eval[api]: its API models need it

pytestmark = pytest.mark.slow

BASE_PROMPTS = "3"  # 24 probes per route: each request is one CPU generation


TASK = "phaseaware_phase_sweep"
CHAT_TASK = "phaseaware_phase_sweep_chat"  # written beside TASK by --emit-lm-eval-task


def _lm_eval(task_dir: Path, out: Path, base_url: str, model: str, *, chat: bool) -> None:
    env = dict(os.environ, HF_DATASETS_OFFLINE="1", HF_HUB_OFFLINE="1", HF_HOME=str(out / "hf"))
    route = "chat/completions" if chat else "completions"
    model_args = (
        f"model={model},base_url={base_url}/{route},tokenizer_backend=none,"
        "tokenized_requests=False,num_concurrent=4,max_retries=1"
    )
    args = [
        sys.executable, "-m", "lm_eval",
        "--model", "local-chat-completions" if chat else "local-completions",
        "--model_args", model_args, "--include_path", str(task_dir),
        "--tasks", CHAT_TASK if chat else TASK, "--log_samples", "--output_path", str(out),
    ]  # fmt: skip
    if chat:
        args.append("--apply_chat_template")
    done = subprocess.run(args, env=env, capture_output=True, text=True, timeout=900)
    assert done.returncode == 0, done.stderr[-3000:]


def _score(capsys, out: Path, *flags: str) -> dict:
    args = ["score", str(out), "--format", "lm-eval", "--tokenizer", "reference", "--json"]
    assert main([*args, *flags]) == 0, capsys.readouterr().err
    return json.loads(capsys.readouterr().out)


def _start(haystack: list[int], needle: list[int]) -> int:
    """Where ``needle`` starts in ``haystack`` (exactly once)."""
    starts = [
        i for i in range(len(haystack) - len(needle) + 1) if haystack[i : i + len(needle)] == needle
    ]
    assert len(starts) == 1, starts
    return starts[0]


def test_chat_api_route_is_placed_and_agrees_with_the_completions_route(served, tmp_path, capsys):
    server, engine = served
    common = ["--period", "8", "--base-prompts", BASE_PROMPTS, "--sweeps", "key"]
    task = tmp_path / "task"
    assert main(["calibrate", *common, "--emit-lm-eval-task", str(task)]) == 0
    capsys.readouterr()

    plain, chat = tmp_path / "completions", tmp_path / "chat"
    _lm_eval(task, plain, server.base_url, engine.model_name, chat=False)
    _lm_eval(task, chat, server.base_url, engine.model_name, chat=True)  # the task as emitted
    samples = sorted(chat.rglob(f"samples_{CHAT_TASK}_*.jsonl"))
    assert len(samples) == 1
    records = [json.loads(line) for line in samples[0].read_text().splitlines()]
    logged = records[0]["arguments"]["gen_args_0"]["arg_0"]
    assert isinstance(logged, list) and len(logged) == 1  # the JsonChatStr as json.dumps wrote it

    n = 8 * int(BASE_PROMPTS)
    by_text = _score(capsys, plain)
    by_chat = _score(capsys, chat, "--chat-format", "hf")
    for doc in (by_text, by_chat):
        assert doc["skipped"] == [] and doc["n_scored"] == n

    from phaseaware.chat.formats import get_chat_format
    from phaseaware.scoring.formats import ReadOptions
    from phaseaware.scoring.locate import Locator
    from phaseaware.scoring.score import score_log
    from phaseaware.tokenizers import load_tokenizer

    tok = load_tokenizer("reference")
    chat_format = get_chat_format("hf", tok)
    located = score_log(
        chat, format="lm-eval", locator=Locator(tokenizer=tok, chat_format=chat_format),
        options=ReadOptions(),
    ).located  # fmt: skip
    text_located = score_log(
        plain, format="lm-eval", locator=Locator(tokenizer=tok), options=ReadOptions()
    ).located
    text_found = {s.sample_id.split(":doc ")[1]: s for s in text_located}
    found = {s.sample_id.split(":doc ")[1]: s for s in located}
    assert set(found) == set(text_found)  # the same documents graded by both routes
    for record in records:
        messages = json.loads(record["arguments"]["gen_args_0"]["arg_0"][0])
        # lm-eval sent the document's content as the one user message, without BOS text
        assert messages == [{"role": "user", "content": record["doc"]["content"]}]
        assert not record["doc"]["content"].startswith(tok.bos_text)
        ids = engine.encode_chat(messages)  # the server's own tokenization of the chat
        sample = found[str(record["doc_id"])]
        assert sample.prompt_tokens == len(ids)
        # the key: the needle's first token, found in the server's ids (the needle is unique)
        assert sample.key_position == _start(ids, tok.encode(record["doc"]["needle"]))
        # the routes agree sample for sample: the server's template renders the content back
        # into the completions prompt, so the key and the length are the same, and both are
        # where the emitted document (phaseaware's probe) put them
        text_sample = text_found[str(record["doc_id"])]
        assert (sample.key_position, sample.prompt_tokens) == (
            text_sample.key_position, text_sample.prompt_tokens
        )  # fmt: skip
        assert sample.key_position == record["doc"]["key_position"]
    assert sorted(r["doc"]["residue"] for r in records) == sorted(
        list(range(8)) * int(BASE_PROMPTS)
    )
