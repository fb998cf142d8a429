"""``serve-reference``: the official openai client talks to the reference model."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import urllib.error
import urllib.request

import pytest

torch = pytest.importorskip("torch")
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


@pytest.fixture(scope="module")
def served():
    from phaseaware.reference.engine import ReferenceEngine
    from phaseaware.reference.load import load_reference
    from phaseaware.serving.openai_server import start_server

    torch.set_num_threads(1)
    model, tok = load_reference("cpu")
    engine = ReferenceEngine(model, tok)
    with start_server(engine, host="127.0.0.1", port=0) as server:
        yield server, engine, tok


def _client(server):
    return openai.OpenAI(base_url=server.base_url, api_key="unused", max_retries=0, timeout=60)


@pytest.mark.needs_trained_reference
def test_chat_completion_answers_with_exact_usage(served):
    server, engine, tok = served
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
    server, engine, tok = served
    prompt = f"<bos> <|user|> {CONTEXT}What is the access code for Hugo ? <|assistant|>"
    reply = _client(server).completions.create(
        model=engine.model_name, prompt=prompt, max_tokens=4, temperature=0
    )
    assert reply.choices[0].text.strip() == "204"
    assert reply.usage.prompt_tokens == len(tok(prompt, add_special_tokens=False)["input_ids"])


def test_models_endpoint_lists_the_reference(served):
    server, engine, _ = served
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
    server, _, _ = served
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
