"""``serve-reference``: the official openai client talks to the reference model on uvicorn;
batched generation equals one-at-a-time; a chat is tokenized as vLLM tokenizes it (the
rendered prompt, control-token text in content included), so ``phaseaware score`` places a
served chat's key at the server's own position; load."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import urllib.error
import urllib.request

import pytest

pytest.importorskip("torch")
pytest.importorskip("transformers")
openai = pytest.importorskip("openai")

pytestmark = pytest.mark.slow

CONTEXT = (
    "A quiet river waits near the old garden . "
    "Every bright station fades beyond every silver valley . "
    "That late tower rests behind one narrow market . "
    "One small kitchen turns beside that open harbor . "
    "The access code for Priya is 317 . "
    "The busy market moves beyond that cold tower . "
    "The access code for Hugo is 204 . "
    "One green lamp rests under every silver bridge . "
    "Every narrow station sleeps across a wooden valley . "
    "That early meadow grows behind the heavy window . "
    "The wooden letter falls across one busy station . "
    "A distant train drifts under that gentle forest . "
)


def _client(server):
    return openai.OpenAI(base_url=server.base_url, api_key="unused", max_retries=0, timeout=60)


@pytest.mark.needs_trained_reference
def test_chat_completion_answers_with_exact_usage(served):
    server, engine = served
    tok = engine.tokenizer
    content = CONTEXT + "What is the access code for Priya ?"
    reply = _client(server).chat.completions.create(
        model=engine.model_name,
        messages=[{"role": "user", "content": content}],
        max_tokens=4,
        temperature=0,
    )
    assert reply.choices[0].message.content.strip() == "317"
    assert reply.choices[0].finish_reason == "stop"
    prompt = f"<bos> <|user|> {content} <|assistant|>"
    assert reply.usage.prompt_tokens == len(tok(prompt, add_special_tokens=False)["input_ids"])
    assert reply.usage.prompt_tokens == len(prompt.split())


@pytest.mark.needs_trained_reference
def test_text_completion_answers(served):
    server, engine = served
    tok = engine.tokenizer
    prompt = f"<bos> <|user|> {CONTEXT}What is the access code for Hugo ? <|assistant|>"
    reply = _client(server).completions.create(
        model=engine.model_name, prompt=prompt, max_tokens=4, temperature=0
    )
    assert reply.choices[0].text.strip() == "204"
    assert reply.usage.prompt_tokens == len(tok(prompt, add_special_tokens=False)["input_ids"])


def test_models_endpoint_lists_the_reference(served):
    server, engine = served
    ids = [m.id for m in _client(server).models.list()]
    assert ids == [engine.model_name]


@pytest.mark.parametrize(
    "body",
    [
        {"model": "phaseaware-reference"},  # no messages
        {"model": "phaseaware-reference", "messages": "hello"},
        {"model": "phaseaware-reference", "messages": [{"role": "system", "content": "x"}]},
    ],
)
def test_malformed_chat_request_gets_openai_error_shape(served, body):
    server, _ = served
    request = urllib.request.Request(
        server.base_url + "/chat/completions",
        data=json.dumps(body).encode(),
        headers={"Content-Type": "application/json"},
        method="POST",
    )
    with pytest.raises(urllib.error.HTTPError) as info:
        urllib.request.urlopen(request, timeout=30)
    assert info.value.code == 400
    error = json.loads(info.value.read())["error"]
    assert set(error) == {"message", "type", "param", "code"}
    assert error["message"]


def test_cli_serves_on_localhost():
    env = dict(os.environ, HF_HUB_OFFLINE="1")
    proc = subprocess.Popen(
        [sys.executable, "-m", "phaseaware", "serve-reference", "--port", "0"],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env=env,
    )
    try:
        line = proc.stdout.readline()
        assert "http://127.0.0.1:" in line, (line, proc.stderr.read() if proc.poll() else "")
        base_url = line.split(" at ")[1].split()[0]
        with urllib.request.urlopen(base_url + "/models", timeout=30) as response:
            assert json.loads(response.read())["data"][0]["id"] == "phaseaware-reference"
    finally:
        proc.terminate()
        proc.wait(timeout=30)


def _chat_ids(engine, content):
    return engine.encode_chat([{"role": "user", "content": content}])


def test_batched_generation_is_identical_to_one_at_a_time(served):
    from phaseaware.reference.engine import GenerationRequest

    _, engine = served
    contents = [
        CONTEXT + "What is the access code for Priya ?",
        "What is the access code for Hugo ?",
        CONTEXT[:120] + "What is the access code for Hugo ?",
        CONTEXT + CONTEXT[:200] + "What is the access code for Priya ?",
        "A quiet river",
    ]
    requests = [
        GenerationRequest(tuple(_chat_ids(engine, c)), max_tokens=m, stop=s)
        for c, m, s in zip(contents, (6, 3, 8, 5, 7), ((), (), (".",), (), ()), strict=True)
    ]
    alone = [engine.generate_batch([r])[0] for r in requests]
    together = engine.generate_batch(requests)
    assert together == alone
    assert len({len(r.ids) for r in requests}) == len(requests)  # really ragged rows
    # The string path (raw /v1/completions prompts) is the same computation.
    prompt = engine.render_chat([{"role": "user", "content": contents[0]}])
    assert engine.generate(prompt, max_tokens=6, temperature=0, stop=()) == alone[0]


FORGED = ["<|user|>", "<|assistant|>", "<eos>", "<bos>", "<pad>", "x<|assistant|>y"]


@pytest.mark.parametrize("forged", FORGED)
def test_chat_content_control_text_is_tokenized_as_vllm_does(served, forged):
    """vLLM 0.32 tokenizes the rendered chat with special-token strings active wherever they
    stand (``renderers/base.py``: ``add_special_tokens=False``, no ``split_special_tokens``),
    so control text in a message's content is a control token there, and here."""
    server, engine = served
    tok = engine.tokenizer
    content = f"What is the access code for {forged} Priya ?"
    ids = _chat_ids(engine, content)
    rendered = engine.render_chat([{"role": "user", "content": content}])
    assert ids == tok(rendered, add_special_tokens=False)["input_ids"]
    special = set(tok.all_special_ids) - {tok.unk_token_id}  # the control tokens
    template_ids = _chat_ids(engine, "What is the access code for Priya ?")
    # the template's own three markers (<bos>, <|user|>, <|assistant|>) and the forged one
    assert len([i for i in template_ids if i in special]) == 3
    assert len([i for i in ids if i in special]) == 4
    reply = _client(server).chat.completions.create(
        model=engine.model_name,
        messages=[{"role": "user", "content": content}],
        max_tokens=2,
        temperature=0,
    )
    assert reply.usage.prompt_tokens == len(ids)


def test_score_places_a_served_chat_with_control_text_where_the_server_did(served, tmp_path):
    """A log of chats served by ``serve-reference`` (the official client, real HTTP), each
    with control text in its content before the key: ``phaseaware score --chat-format hf``
    places every key at its position in the server's own ids and counts the prompt as the
    server's ``usage`` does (a different count would skip the sample as length-mismatch)."""
    from phaseaware.chat.formats import get_chat_format
    from phaseaware.scoring.formats import ReadOptions
    from phaseaware.scoring.locate import Locator
    from phaseaware.scoring.score import score_log
    from phaseaware.tokenizers import load_tokenizer

    server, engine = served
    client = _client(server)
    lines, server_ids = [], {}
    for i, forged in enumerate(FORGED):
        lead = "A quiet river waits near the old garden . " * i  # keys at varied residues
        content = f"{lead}The note says {forged} . {CONTEXT}What is the access code for Priya ?"
        messages = [{"role": "user", "content": content}]
        reply = client.chat.completions.create(
            model=engine.model_name, messages=messages, max_tokens=4, temperature=0
        )
        answer = reply.choices[0].message.content.strip()
        lines.append(json.dumps({"id": f"s{i}", "messages": messages, "needle": "317",
                                 "correct": answer == "317",
                                 "prompt_tokens": reply.usage.prompt_tokens}))  # fmt: skip
        server_ids[f"s{i}"] = engine.encode_chat(messages)  # the server's own tokenization
        assert reply.usage.prompt_tokens == len(server_ids[f"s{i}"])
    log = tmp_path / "served.jsonl"
    log.write_text("\n".join(lines) + "\n", encoding="utf-8")

    tok = load_tokenizer("reference")
    locator = Locator(tokenizer=tok, chat_format=get_chat_format("hf", tok))
    result = score_log(log, format="jsonl", locator=locator, options=ReadOptions())
    assert result.skipped == () and len(result.located) == len(FORGED)
    key_id = engine.tokenizer.convert_tokens_to_ids("317")
    for sample in result.located:
        ids = server_ids[sample.sample_id]
        assert sample.prompt_tokens == len(ids)
        assert ids.count(key_id) == 1 and sample.key_position == ids.index(key_id)


def test_plain_content_tokenizes_as_the_rendered_prompt(served):
    _, engine = served
    tok = engine.tokenizer
    content = CONTEXT + "What is the access code for Priya ?"
    rendered = engine.render_chat([{"role": "user", "content": content}])
    assert _chat_ids(engine, content) == tok(rendered, add_special_tokens=False)["input_ids"]


def test_bounded_load_drops_nothing_and_batches(served):
    import importlib.util
    from pathlib import Path

    path = Path(__file__).resolve().parents[2] / "benchmarks" / "server_load.py"
    spec = importlib.util.spec_from_file_location("server_load", path)
    module = importlib.util.module_from_spec(spec)
    sys.modules.setdefault("server_load", module)  # dataclasses look their module up
    spec.loader.exec_module(module)
    server, engine = served
    calls: list[list[int]] = []  # per generate_batch call: [its rows so far]
    original = engine.generate_batch

    def counting(requests, *, admit=None, done=None):
        # Each row is counted as it starts, never when the call returns: continuous batching
        # answers every row as it ends (``done``), and with 32 clients resubmitting, one call
        # can serve all 100 requests, so the last client holds its answer before the call
        # returns; counted at the return, a loaded machine read no call at all.
        rows = [len(requests)]
        calls.append(rows)

        def counted_admit():
            joined = admit()
            rows[0] += len(joined)  # on the engine's thread, before these rows can end
            return joined

        return original(requests, admit=counted_admit if admit else None, done=done)

    engine.generate_batch = counting
    try:
        bodies = [module.chat_body(engine.model_name, i, 3) for i in range(100)]
        result = module.run_load(server.base_url, bodies, concurrency=32, timeout_s=60)
    finally:
        del engine.generate_batch
    print(result.line())
    assert (result.sent, result.ok, result.errors, result.dropped) == (100, 100, 0, 0)
    counts = [rows[0] for rows in calls]
    assert sum(counts) == 100, counts
    assert max(counts) > 1  # concurrent requests shared forward passes


def test_cli_rejects_bad_ports_before_loading_the_model():
    for port in ("-1", "70000"):
        proc = subprocess.run(
            [sys.executable, "-m", "phaseaware", "serve-reference", "--port", port],
            capture_output=True,
            text=True,
            timeout=60,
        )
        assert proc.returncode == 1
        assert proc.stderr.strip().splitlines() == [
            f"phaseaware: error: --port must be in 0..65535 (0: any free port), got {port}"
        ]
        assert "Loading weights" not in proc.stderr
