"""Token for token against a real vLLM: phaseaware's ids vs ``/tokenize`` and usage.

For every chat setting and conversation: the server's ``POST /tokenize`` (messages,
``add_generation_prompt``) must return exactly phaseaware's ids, and a
``/v1/chat/completions`` call (official ``openai`` client, ``max_tokens=1``) must
count exactly as many prompt tokens. vLLM's ``/tokenize`` ignores
``reasoning_content`` (its chat route reads ``reasoning``), so conversations with
reasoning are held to the usage count too, where it is rendered.
"""

from __future__ import annotations

import statistics
import time
from collections.abc import Mapping, Sequence
from typing import Any

import pytest

from phaseaware.tokenizers import load_tokenizer
from phaseaware.tokenizers.base import Tokenizer
from tests.e2e.vllm.cases import (
    CONVERSATIONS,
    HF_SETTINGS,
    TOOL_CASES,
    V4_SETTINGS,
    V41_SETTINGS,
    Setting,
    Unsupported,
    local_text,
    request_messages,
)
from tests.e2e.vllm.conftest import RESULTS, TIMINGS
from tests.support.vllm_server import VllmServer, deepseek_v3_files

CALL_TIMES: list[float] = []


def _client(server: VllmServer) -> Any:
    import openai

    return openai.OpenAI(base_url=server.base_url, api_key="EMPTY", timeout=60, max_retries=0)


def _body(server: VllmServer, messages: Sequence[Mapping[str, Any]], s: Setting) -> dict[str, Any]:
    body: dict[str, Any] = {"model": server.model, "messages": request_messages(messages)}
    if s.kwargs is not None:
        body["chat_template_kwargs"] = dict(s.kwargs)
    if s.tools:
        body["tools"] = list(s.tools)
    if s.field_effort is not None:
        body["reasoning_effort"] = s.field_effort
    return body


def _server_ids(client: Any, server: VllmServer, body: Mapping[str, Any]) -> list[int]:
    body = dict(body)
    effort = body.pop("reasoning_effort", None)
    if effort is not None:
        # /tokenize has no reasoning_effort field: send the template kwargs the chat route
        # makes of it (ChatCompletionRequest.build_chat_params, vLLM 0.32); the usage
        # count checks the field itself on the chat route
        kwargs = dict(body.get("chat_template_kwargs") or {})
        kwargs["reasoning_effort"] = effort
        kwargs.setdefault("enable_thinking", effort != "none")
        body["chat_template_kwargs"] = kwargs
    doc = client.post(
        f"{server.root}/tokenize", body={**body, "add_generation_prompt": True}, cast_to=object
    )
    return list(doc["tokens"])


def _usage(client: Any, server: VllmServer, body: Mapping[str, Any]) -> int:
    extra = {k: v for k, v in body.items() if k not in ("model", "messages", "tools")}
    start = time.monotonic()
    response = client.chat.completions.create(
        model=server.model,
        messages=body["messages"],
        tools=body.get("tools") or None,
        max_tokens=1,
        temperature=0,
        extra_body=extra or None,
    )
    CALL_TIMES.append(time.monotonic() - start)
    TIMINGS["chat call max_tokens=1, median"] = statistics.median(CALL_TIMES)
    return int(response.usage.prompt_tokens)


def _first_diff(tok: Tokenizer, server: Sequence[int], local: Sequence[int]) -> str:
    j = next((i for i, (a, b) in enumerate(zip(server, local, strict=False)) if a != b), None)
    j = min(len(server), len(local)) if j is None else j
    srv = tok.decode(list(server[j : j + 4])) if j < len(server) else "(end)"
    loc = tok.decode(list(local[j : j + 4])) if j < len(local) else "(end)"
    return f"{len(server)} vs {len(local)} tokens; first difference at {j}: server {srv!r}, phaseaware {loc!r}"


def _compare(
    server: VllmServer, tok: Tokenizer, chat_format: str, s: Setting, cases: Sequence[str]
) -> list[str]:
    client = _client(server)
    failures = []
    for case in cases:
        messages = CONVERSATIONS[case]
        key = (f"{server.label} {s.name}", case)
        body = _body(server, messages, s)
        try:
            local = tok.encode(local_text(tok, chat_format, messages, s))
        except Unsupported as exc:
            RESULTS[key] = (False, f"phaseaware cannot render it: {exc}")
            failures.append(f"{case}: {exc}")
            continue
        remote = _server_ids(client, server, body)
        counted = _usage(client, server, body)
        why = []
        if remote != local:
            why.append("/tokenize " + _first_diff(tok, remote, local))
        if counted != len(local):
            why.append(f"usage.prompt_tokens {counted}, phaseaware {len(local)}")
        RESULTS[key] = (not why, "; ".join(why))
        if why:
            failures.append(f"{case}: {'; '.join(why)}")
    return failures


@pytest.fixture(scope="module")
def v4_tokenizer() -> Tokenizer:
    return load_tokenizer("deepseek-v4")


@pytest.mark.parametrize("setting", V4_SETTINGS, ids=lambda s: s.name)
def test_deepseek_v4_mode(vllm_v4: VllmServer, v4_tokenizer: Tokenizer, setting: Setting) -> None:
    failures = _compare(vllm_v4, v4_tokenizer, "deepseek-v4", setting, list(CONVERSATIONS))
    assert not failures, "\n".join(failures)


@pytest.mark.parametrize("setting", V41_SETTINGS, ids=lambda s: s.name)
def test_deepseek_v41_mode(vllm_v41: VllmServer, v4_tokenizer: Tokenizer, setting: Setting) -> None:
    import phaseaware.chat as chat

    if "deepseek-v4.1" not in chat.CHAT_FORMAT_NAMES:
        RESULTS[(f"v41 {setting.name}", "*")] = (False, "phaseaware has no deepseek-v4.1 format")
        pytest.fail("phaseaware has no deepseek-v4.1 chat format yet")
    failures = _compare(vllm_v41, v4_tokenizer, "deepseek-v4.1", setting, list(CONVERSATIONS))
    assert not failures, "\n".join(failures)


# vLLM cannot serve DeepSeek-V3 tool histories with the stock V3 template (HTTP 400, "can
# only concatenate str (not "dict") to str": it turns tool-call arguments into dicts). That
# is vLLM's limitation, not phaseaware's, so V3 is compared on the conversations without tools.
NO_TOOLS = [c for c in CONVERSATIONS if c not in TOOL_CASES]


def test_hf_deepseek_v3_template(vllm_v3: VllmServer) -> None:
    tok = load_tokenizer(f"hf:{deepseek_v3_files()}")
    failures = _compare(vllm_v3, tok, "hf", HF_SETTINGS[0], NO_TOOLS)
    assert not failures, "\n".join(failures)


# The reference model's template knows the user and assistant roles only.
REFERENCE_CASES = ["user", "user-assistant-user"]


def test_hf_reference_model_template(vllm_reference: VllmServer) -> None:
    tok = load_tokenizer("reference")
    failures = _compare(vllm_reference, tok, "hf", HF_SETTINGS[0], REFERENCE_CASES)
    assert not failures, "\n".join(failures)
