"""``hf`` with bound tools against a real vLLM: the template gets the tools as vLLM passes them.

The served folder is SmolLM2's tokenizer with Qwen2.5's chat template (ChatML, and it
writes each tool with ``tojson``). For each conversation, with and without a bound tool:
``POST /tokenize`` (messages, tools, ``add_generation_prompt``) returns exactly
phaseaware's ids, and a chat call (``tool_choice="none"``: no tool parser needed; vLLM
still renders the tools) counts exactly as many prompt tokens.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest

from phaseaware.chat import ChatSettings, get_chat_format, parse_messages
from phaseaware.tokenizers import load_tokenizer
from tests.e2e.vllm.conftest import RESULTS, _OneAtATime, _server
from tests.support.chat_cases import TOOL_HISTORY, WEATHER_TOOL
from tests.support.optional import SMOLLM2_MISSING
from tests.support.smollm2 import smollm2_gguf, template, tokenizer_folder
from tests.support.vllm_server import VllmServer

CONVERSATIONS: dict[str, list[dict[str, Any]]] = {
    "user": [{"role": "user", "content": "What is the weather in Paris?"}],
    "system+user": [
        {"role": "system", "content": "You are terse."},
        {"role": "user", "content": "Name three rivers in France."},
    ],
    "multi-turn": [
        {"role": "system", "content": "Answer in one line."},
        {"role": "user", "content": "What is 2 + 2?"},
        {"role": "assistant", "content": "4"},
        {"role": "user", "content": "And times 3?"},
    ],
}


@pytest.fixture(scope="module")
def folder(tmp_path_factory: pytest.TempPathFactory) -> Any:
    if smollm2_gguf() is None:
        pytest.skip(SMOLLM2_MISSING)
    return tokenizer_folder(tmp_path_factory.mktemp("smollm2-qwen"), template("qwen2_5"))


@pytest.fixture
def vllm_qwen(
    _one_at_a_time: _OneAtATime, tmp_path_factory: pytest.TempPathFactory, folder: Any
) -> VllmServer:
    def start() -> Iterator[VllmServer]:
        yield from _server(tmp_path_factory, "smollm2-qwen", folder, mode=None)

    return _one_at_a_time.get("smollm2-qwen", start)


@pytest.mark.parametrize("tools", [(), (WEATHER_TOOL,)], ids=["no tools", "tools"])
def test_hf_tools_match_vllm_token_for_token(vllm_qwen: VllmServer, folder: Any, tools) -> None:
    tok = load_tokenizer(f"hf:{folder}")
    for messages in CONVERSATIONS.values():
        text = get_chat_format("hf", tok, settings=ChatSettings(tools=tools)).render(
            parse_messages(messages)
        )
        assert ("get_weather" in text) == bool(tools)
    _check(vllm_qwen, tok, tools, CONVERSATIONS, "hf (Qwen2.5 template)")


@pytest.mark.parametrize("tools", [(), (WEATHER_TOOL,)], ids=["no tools", "tools"])
def test_tool_call_arguments_reach_the_template_as_an_object(
    vllm_qwen: VllmServer, folder: Any, tools
) -> None:
    """vLLM parses a tool call's ``arguments`` before rendering (``_postprocess_messages``):
    the ``hf`` format's default; the JSON-text form differs in bytes."""
    tok = load_tokenizer(f"hf:{folder}")
    as_text = ChatSettings(tools=tools, tool_arguments="string")
    history = parse_messages(TOOL_HISTORY)
    assert get_chat_format("hf", tok, settings=as_text).render(history) != get_chat_format(
        "hf", tok, settings=ChatSettings(tools=tools)
    ).render(history)
    _check(vllm_qwen, tok, tools, {"tool call + result": TOOL_HISTORY},
           "hf (Qwen2.5 template, tool-call arguments)")  # fmt: skip


def _check(
    server: VllmServer, tok: Any, tools: Any, conversations: dict[str, Any], setting: str
) -> None:
    import openai

    fmt = get_chat_format("hf", tok, settings=ChatSettings(tools=tools))
    client = openai.OpenAI(base_url=server.base_url, api_key="EMPTY", max_retries=0)
    setting += " + tools" if tools else ""
    problems = []
    for name, messages in conversations.items():
        text = fmt.render(parse_messages(messages))
        ids = tok.encode(text)
        extra: dict[str, Any] = {"tools": [dict(t) for t in tools]} if tools else {}
        doc = client.post(
            f"{server.root}/tokenize", cast_to=object,
            body={"model": server.model, "messages": messages, "add_generation_prompt": True,
                  **extra},
        )  # fmt: skip
        reply = client.chat.completions.create(
            model=server.model, messages=messages, max_tokens=1, temperature=0,  # type: ignore[arg-type]
            **({**extra, "tool_choice": "none"} if tools else {}),
        )  # fmt: skip
        assert reply.usage is not None
        ok = list(doc["tokens"]) == list(ids) and reply.usage.prompt_tokens == len(ids)
        RESULTS[(setting, name)] = (ok, "" if ok else "tokenize or usage differs")
        if not ok:
            problems.append(name)
    assert not problems, problems


def test_probe_finds_vllm_passes_tool_arguments_as_an_object(
    vllm_qwen: VllmServer, folder: Any
) -> None:
    from phaseaware.endpoints import probe_endpoint

    found = probe_endpoint(
        base_url=vllm_qwen.base_url, model=vllm_qwen.model, tokenizer=f"hf:{folder}",
        chat_format="hf", rounds=2, save=False,
    )  # fmt: skip
    ok = found.tool_arguments == "object" and found.mode == "exact"
    RESULTS[("hf (Qwen2.5 template)", "probe-endpoint tool_arguments")] = (ok, found.tool_arguments)
    assert ok, (found.mode, found.tool_arguments)
