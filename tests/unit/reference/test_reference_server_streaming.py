"""Streaming from the OpenAI-compatible server: SSE in the OpenAI chunk format, the final
usage chunk, ``data: [DONE]``, errors before the first byte as JSON; read by the official
``openai`` client, LangChain's ``ChatOpenAI`` and LlamaIndex's ``OpenAILike`` on loopback."""

from __future__ import annotations

import asyncio
import http.client
import json

import pytest

from tests.support.fault_server import start_server
from tests.support.optional import require
from tests.support.task_engine import BatchLookupEngine, TaskLookupEngine

MODEL = "phaseaware-task-lookup"
CONTENT = "The access code for Alice is 123 . What is the access code for Alice ?"
CHAT = {"model": MODEL, "messages": [{"role": "user", "content": CONTENT}], "max_tokens": 4}
COMPLETION = {"model": MODEL, "prompt": CONTENT, "max_tokens": 4, "temperature": 0}


@pytest.fixture(params=["plain", "batch"])
def server(request):
    engine = TaskLookupEngine() if request.param == "plain" else BatchLookupEngine()
    with start_server(engine) as running:
        yield running


def _raw(server, path, body):
    conn = http.client.HTTPConnection(server.host, server.port, timeout=5)
    try:
        conn.request("POST", path, body=json.dumps(body), headers={"Content-Type": "x"})
        response = conn.getresponse()
        return response.status, response.getheader("content-type"), response.read()
    finally:
        conn.close()


def _events(raw: bytes) -> list[str]:
    assert raw.endswith(b"\n\n")
    blocks = raw.decode().split("\n\n")[:-1]
    assert all(b.startswith("data: ") for b in blocks), blocks
    return [b[len("data: ") :] for b in blocks]


def test_chat_stream_is_sse_chunks_then_usage_then_done(server):
    body = {**CHAT, "stream": True, "stream_options": {"include_usage": True}}
    status, kind, raw = _raw(server, "/v1/chat/completions", body)
    assert status == 200 and kind.startswith("text/event-stream")
    events = _events(raw)
    assert events[-1] == "[DONE]"
    chunks = [json.loads(e) for e in events[:-1]]
    assert {c["object"] for c in chunks} == {"chat.completion.chunk"}
    assert len({c["id"] for c in chunks}) == 1
    assert chunks[0]["choices"][0]["delta"] == {"role": "assistant", "content": ""}
    text = "".join(c["choices"][0]["delta"].get("content", "") for c in chunks[:-1])
    assert text == " 123 ."
    assert [c["choices"][0]["finish_reason"] for c in chunks[:-1]][-1] == "stop"
    assert all(c["usage"] is None for c in chunks[:-1])
    usage = chunks[-1]["usage"]
    assert chunks[-1]["choices"] == []
    assert usage["completion_tokens"] == 2
    assert usage["total_tokens"] == usage["prompt_tokens"] + 2
    # the same usage as the non-streaming answer
    plain = json.loads(_raw(server, "/v1/chat/completions", CHAT)[2])
    assert plain["usage"] == usage


def test_completion_stream_without_usage(server):
    status, _, raw = _raw(server, "/v1/completions", {**COMPLETION, "stream": True})
    assert status == 200
    events = _events(raw)
    assert events[-1] == "[DONE]"
    chunks = [json.loads(e) for e in events[:-1]]
    assert {c["object"] for c in chunks} == {"text_completion"}
    assert "".join(c["choices"][0]["text"] for c in chunks) == " 123 ."
    assert chunks[-1]["choices"][0]["finish_reason"] == "stop"
    assert all("usage" not in c for c in chunks)


@pytest.mark.parametrize(
    ("changes", "status", "param"),
    [
        ({"stream": "yes"}, 400, "stream"),
        ({"stream_options": {"include_usage": True}}, 400, "stream_options"),
        ({"stream": True, "stream_options": "usage"}, 400, "stream_options"),
        (
            {"stream": True, "stream_options": {"include_usage": 1}},
            400,
            "stream_options.include_usage",
        ),
        ({"stream": True, "model": "other"}, 404, "model"),
        ({"stream": True, "messages": []}, 400, "messages"),
    ],
)
def test_errors_before_the_first_byte_are_json(server, changes, status, param):
    got, kind, raw = _raw(server, "/v1/chat/completions", {**CHAT, **changes})
    assert got == status and kind == "application/json"
    assert json.loads(raw)["error"]["param"] == param


def test_openai_client_streams_with_usage(server):
    import openai

    client = openai.OpenAI(base_url=server.base_url, api_key="unused", max_retries=0)
    stream = client.chat.completions.create(
        model=MODEL,
        messages=CHAT["messages"],
        max_tokens=4,
        stream=True,
        stream_options={"include_usage": True},
    )
    chunks = list(stream)
    text = "".join(c.choices[0].delta.content or "" for c in chunks if c.choices)
    assert text == " 123 ."
    assert chunks[-1].usage is not None and chunks[-1].usage.completion_tokens == 2
    completions = client.completions.create(model=MODEL, prompt=CONTENT, max_tokens=4, stream=True)
    assert "".join(c.choices[0].text for c in completions) == " 123 ."


def test_openai_async_client_streams(server):
    import openai

    async def run():
        client = openai.AsyncOpenAI(base_url=server.base_url, api_key="unused", max_retries=0)
        stream = await client.chat.completions.create(
            model=MODEL, messages=CHAT["messages"], max_tokens=4, stream=True
        )
        return "".join([c.choices[0].delta.content or "" async for c in stream if c.choices])

    assert asyncio.run(run()) == " 123 ."


def test_langchain_chat_openai_stream(server):
    require("langchain_openai")
    from langchain_openai import ChatOpenAI

    llm = ChatOpenAI(
        model=MODEL,
        base_url=server.base_url,
        api_key="unused",
        max_tokens=4,
        max_retries=0,
        stream_usage=True,
    )
    chunks = list(llm.stream(CONTENT))
    assert "".join(str(c.content) for c in chunks) == " 123 ."
    usage = [c.usage_metadata for c in chunks if c.usage_metadata]
    assert usage and usage[-1]["output_tokens"] == 2

    async def run():
        return [c async for c in llm.astream(CONTENT)]

    assert "".join(str(c.content) for c in asyncio.run(run())) == " 123 ."


def test_llama_index_openai_like_stream_chat(server):
    require("llama_index.llms.openai_like")
    from llama_index.core.llms import ChatMessage
    from llama_index.llms.openai_like import OpenAILike

    llm = OpenAILike(
        model=MODEL,
        api_base=server.base_url,
        api_key="unused",
        is_chat_model=True,
        max_tokens=4,
        max_retries=0,
    )
    responses = list(llm.stream_chat([ChatMessage(role="user", content=CONTENT)]))
    assert responses[-1].message.content == " 123 ."
    assert "".join(r.delta or "" for r in responses) == " 123 ."
    completion = list(llm.stream_complete(CONTENT))
    assert completion[-1].text == " 123 ."
