"""The middleware's id-for-id check over real HTTP: ``ChatOpenAI`` with ``prompt_ids_clients``.

The server is the suite's OpenAI-compatible endpoint (``tests/support/endpoint_server.py``:
real uvicorn on 127.0.0.1, the DeepSeek-V4 tokenizer and chat format). Where asked, it
returns the prompt's ids as vLLM does (``return_token_ids``: on the response) or as SGLang
does (``return_prompt_token_ids``: on the first choice). The endpoint record names the
server. The real vLLM run of the same check is ``tests/e2e/vllm/test_langchain_prompt_ids.py``.
"""

from __future__ import annotations

import asyncio
from types import SimpleNamespace
from typing import Any

import httpx
import pytest

pytest.importorskip("langchain.agents")
pytest.importorskip("langchain_openai")

from langchain.agents import create_agent  # noqa: E402
from langchain_openai import ChatOpenAI  # noqa: E402
from langchain_phaseaware import PhaseAwareMiddleware, prompt_ids_clients  # noqa: E402
from langchain_phaseaware.served import (  # noqa: E402
    REPLIES,
    capture,
    captured,
    delivers_replies,
    record_reply,
    take_reply,
)

from phaseaware.endpoints import EndpointRecord  # noqa: E402
from phaseaware.errors import PromptTokenDriftError  # noqa: E402
from phaseaware.tokenizers import load_tokenizer  # noqa: E402
from tests.support.agent_states import loopback_record, tool_result_state  # noqa: E402
from tests.support.endpoint_server import start_endpoint  # noqa: E402


@pytest.fixture(scope="module")
def deepseek() -> Any:
    return load_tokenizer("deepseek-v4")


def _record(tok: Any, server: str) -> EndpointRecord:
    return loopback_record(tok, server)


def _state() -> dict[str, Any]:
    return tool_result_state()


def _run(
    tok: Any,
    *,
    server: str,
    clients: bool,
    template_edit: tuple[str, str] | None = None,
    check_usage: str = "raise",
    run_async: bool = False,
    **model_args: Any,
) -> tuple[list[Any], list[dict[str, Any]]]:
    """One aligned agent call: the checks made, the request bodies the server got."""
    bodies: list[dict[str, Any]] = []

    def answer(served: Any, body: dict[str, Any]) -> str:
        bodies.append(body)
        return "4000-A"

    running, _app = start_endpoint(
        tokenizer=tok, chat_format="deepseek-v4", answer=answer, template_edit=template_edit
    )
    checks: list[Any] = []
    with running:
        middleware = PhaseAwareMiddleware(
            tokenizer=tok, chat_format="deepseek-v4", profile="deepseek-v4-flash-base",
            budget_tokens=4000, endpoint=_record(tok, server), check_usage=check_usage,
            tool_schemas="not_rendered", on_check=checks.append,
        )  # fmt: skip
        model = ChatOpenAI(
            base_url=running.base_url, api_key="x", model="sim-model", max_retries=0,
            **(prompt_ids_clients() if clients else {}), **model_args,
        )  # fmt: skip
        agent = create_agent(model=model, tools=[], middleware=[middleware])
        state = asyncio.run(agent.ainvoke(_state())) if run_async else agent.invoke(_state())
    assert "phaseaware" in state["messages"][2].response_metadata  # aligned
    return checks, bodies


def test_vllm_ids_are_asked_for_and_compared(deepseek: Any) -> None:
    checks, bodies = _run(deepseek, server="vllm 0.32.0", clients=True)
    assert bodies[-1]["return_token_ids"] is True
    (check,) = checks
    assert check.ids_compared and check.first_difference is None and check.drift == 0


def test_without_the_clients_nothing_is_asked_and_the_count_is_checked(deepseek: Any) -> None:
    """A plain ``ChatOpenAI`` would drop ``prompt_token_ids``: the request does not ask for
    them (sync or async), and the count in ``usage_metadata`` is checked."""
    checks, bodies = _run(deepseek, server="vllm 0.32.0", clients=False)
    assert "return_token_ids" not in bodies[-1] and "prompt_token_ids" not in str(bodies[-1])
    (check,) = checks
    assert not check.ids_compared and check.drift == 0
    checks, bodies = _run(deepseek, server="vllm 0.32.0", clients=False, run_async=True)
    assert "return_token_ids" not in bodies[-1]
    assert not checks[0].ids_compared and checks[0].drift == 0
    checks, bodies = _run(deepseek, server="vllm 0.32.0", clients=True, run_async=True)
    assert bodies[-1]["return_token_ids"] is True and checks[0].ids_compared


def test_a_client_without_the_hook_for_the_path_asks_nothing(deepseek: Any) -> None:
    """Only the sync client carries the hook: an async call (the default async client)
    asks nothing."""
    sync_only = {"http_client": prompt_ids_clients()["http_client"]}
    checks, bodies = _run(
        deepseek, server="vllm 0.32.0", clients=False, run_async=True, **sync_only
    )
    assert "return_token_ids" not in bodies[-1] and not checks[0].ids_compared
    checks, bodies = _run(deepseek, server="vllm 0.32.0", clients=False, **sync_only)
    assert bodies[-1]["return_token_ids"] is True and checks[0].ids_compared


def test_delivers_replies_reads_only_public_fields() -> None:
    clients = prompt_ids_clients()
    model = ChatOpenAI(base_url="http://127.0.0.1:9/v1", api_key="x", model="m", **clients)
    assert delivers_replies(model, asynchronous=False)
    assert delivers_replies(model, asynchronous=True)
    plain = ChatOpenAI(base_url="http://127.0.0.1:9/v1", api_key="x", model="m")
    assert not delivers_replies(plain, asynchronous=False)
    assert not delivers_replies(plain, asynchronous=True)
    swapped = SimpleNamespace(
        http_client=clients["http_async_client"], http_async_client=clients["http_client"]
    )
    assert not delivers_replies(swapped, asynchronous=False)  # the wrong hook for the path
    assert not delivers_replies(swapped, asynchronous=True)
    assert not delivers_replies(object(), asynchronous=False)  # no client at all
    streams = ChatOpenAI(
        base_url="http://127.0.0.1:9/v1", api_key="x", model="m", streaming=True, **clients
    )
    assert delivers_replies(streams, asynchronous=False)  # a stream is read as it passes
    assert delivers_replies(streams, asynchronous=True)


def test_sglang_ids_only_where_the_model_cannot_stream(deepseek: Any) -> None:
    """SGLang refuses ``return_prompt_token_ids`` on a stream: it is asked for only when
    the chat model has ``disable_streaming=True``, and then found on the first choice."""
    checks, bodies = _run(deepseek, server="sglang 0.5.23", clients=True)
    assert "return_prompt_token_ids" not in bodies[-1]
    assert not checks[0].ids_compared and checks[0].drift == 0
    checks, bodies = _run(deepseek, server="sglang 0.5.23", clients=True, disable_streaming=True)
    assert bodies[-1]["return_prompt_token_ids"] is True
    assert checks[0].ids_compared and checks[0].first_difference is None


def test_one_token_off_is_caught_by_position_not_by_count(deepseek: Any) -> None:
    """The server writes ``<think>`` where the plan has ``</think>`` (the assistant turn's
    opening, mid-prompt): one token, the same count."""
    edit = ("</think>", "<think>")
    checks, _ = _run(deepseek, server="vllm 0.32.0", clients=False, template_edit=edit)
    assert not checks[0].ids_compared and checks[0].drift == 0  # the count cannot see it
    with pytest.warns(match="differ from phaseaware's at planned token") as seen:
        checks, _ = _run(
            deepseek, server="vllm 0.32.0", clients=True, template_edit=edit, check_usage="warn"
        )
    (check,) = checks
    assert check.ids_compared and check.drift == 0
    think, end_think = deepseek.encode("<think>")[0], deepseek.encode("</think>")[0]
    assert check.difference == f"server id {think}, phaseaware id {end_think}"
    assert 0 < check.first_difference < check.planned_tokens - 1  # mid-prompt
    assert f"at planned token {check.first_difference} " in str(seen[0].message)
    with pytest.raises(PromptTokenDriftError, match=f"at planned token {check.first_difference} "):
        _run(deepseek, server="vllm 0.32.0", clients=True, template_edit=edit)


_JSON = {"content-type": "application/json"}


def test_the_hooks_leave_a_stream_to_the_client_and_keep_a_reply_for_its_call_only() -> None:
    """In a capture a reply goes to that capture; outside one to ``REPLIES``, by id. The
    hook reads no stream itself: it is read as the client reads it (``data: {}`` is no
    chunk, so nothing is kept of it)."""
    REPLIES.clear()
    sse = httpx.Response(
        200, headers={"content-type": "text/event-stream"}, stream=httpx.ByteStream(b"data: {}")
    )
    body = b'{"id": "r1", "choices": [], "prompt_token_ids": [1, 2], "usage": {"prompt_tokens": 2}}'
    with capture():
        record_reply(sse)
        assert captured() == [] and not sse.is_stream_consumed  # the stream is the client's
        assert sse.read() == b"data: {}" and captured() == []  # unchanged, and no chunk
        record_reply(httpx.Response(200, content=body, headers=_JSON))
        assert [b["id"] for b in captured()] == ["r1"]
    assert len(REPLIES) == 0  # a captured reply is the middleware's alone
    record_reply(httpx.Response(200, content=body, headers=_JSON))  # no call is capturing
    assert captured() == [] and len(REPLIES) == 1
    assert take_reply("r1", prompt_tokens=2) == {
        "id": "r1", "usage": {"prompt_tokens": 2}, "prompt_token_ids": [1, 2]
    }  # fmt: skip
    assert take_reply("r1", prompt_tokens=2) is None  # taken once


def test_the_async_hook_feeds_the_tasks_own_call(deepseek: Any) -> None:
    """Two concurrent async calls: each capture gets its own reply only."""
    running, _app = start_endpoint(tokenizer=deepseek, chat_format="deepseek-v4")

    async def one(model: ChatOpenAI, text: str) -> tuple[str | None, list[str]]:
        with capture():
            reply = await model.ainvoke(text)
            return reply.response_metadata.get("id"), [b["id"] for b in captured()]

    async def both(model: ChatOpenAI) -> list[tuple[str | None, list[str]]]:
        return list(await asyncio.gather(one(model, "first"), one(model, "second")))

    with running:
        model = ChatOpenAI(
            base_url=running.base_url, api_key="x", model="sim-model", max_retries=0,
            **prompt_ids_clients(),
        )  # fmt: skip
        results = asyncio.run(both(model))
    for reply_id, kept in results:
        assert reply_id is not None and kept == [reply_id]
