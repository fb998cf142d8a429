"""Streamed LangChain calls, and the middleware with the callback on one call, checked id
for id at a real vLLM, through ``ChatOpenAI``.

vLLM 0.32 takes ``return_token_ids`` on a streamed request too and sends the prompt's ids
on the first chunk (``vllm/entrypoints/openai/chat_completion/serving.py``: "return
prompt_token_ids at the first chunk ever"). The hooks of ``prompt_ids_clients()`` read the
stream as ``ChatOpenAI`` reads it; the middleware and ``PhaseAwareUsageCheck`` compare
those ids with the plan (``ids_compared=True``). The control is vLLM with the reference
template one token off (its generation prompt): a streamed call names the position.
The same servers, fixtures and helpers as ``test_langchain_prompt_ids.py``.
"""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

from phaseaware.endpoints import EndpointRecord
from phaseaware.errors import PhaseawareWarning
from phaseaware.tokenizers import load_tokenizer
from tests.e2e.vllm.conftest import _OneAtATime
from tests.e2e.vllm.test_langchain_prompt_ids import (  # the fixtures too
    PLANNED_PROMPT,
    SWAPPED_PROMPT,
    _agent,
    _chain,
    _inputs,
    _model,
    _reference,
    _state,
    _usage_check,
    record,
    vllm_swapped,
)
from tests.support.vllm_server import VllmServer

pytest.importorskip("langchain.agents")
pytest.importorskip("langchain_openai")

__all__ = ["record", "vllm_swapped"]  # fixtures, used by name


def _ids_ok(check: Any) -> bool:
    return bool(check.ids_compared and check.first_difference is None and check.drift == 0)


def test_streamed_calls_are_checked_id_for_id(
    _one_at_a_time: _OneAtATime, tmp_path_factory: pytest.TempPathFactory, record: EndpointRecord
) -> None:
    server = _reference(_one_at_a_time, tmp_path_factory)
    # the middleware, on a model that streams (sync and async; with and without the usage
    # chunk), and an agent streamed by LangGraph
    checks: list[Any] = []
    for usage in (True, False):
        streamed = _model(server, clients=True, streaming=True, stream_usage=usage)
        _agent(streamed, record, checks).invoke(_state())
        asyncio.run(_agent(streamed, record, checks).ainvoke(_state()))
    plain = _model(server, clients=True, stream_usage=True)
    list(_agent(plain, record, checks).stream(_state(), stream_mode="messages"))
    assert len(checks) == 5 and all(_ids_ok(c) for c in checks), checks
    assert checks[0].planned_tokens > 80

    # PhaseAwareUsageCheck on a chain: .stream() and .astream()
    checks.clear()
    chain = _chain(server, record, clients=True)
    config: Any = {"callbacks": [_usage_check(record, checks)]}
    assert list(chain.stream(_inputs(), config=config))

    async def drain() -> None:
        async for _chunk in chain.astream(_inputs(), config=config):
            pass

    asyncio.run(drain())
    assert len(checks) == 2 and all(_ids_ok(c) for c in checks), checks

    # the middleware and the callback on one call, streamed or not: both compare ids
    for streaming in (False, True):
        ours: list[Any] = []
        theirs: list[Any] = []
        model = _model(server, clients=True, streaming=streaming, stream_usage=True)
        agent = _agent(model, record, ours).with_config(callbacks=[_usage_check(record, theirs)])
        agent.invoke(_state())
        asyncio.run(agent.ainvoke(_state()))
        assert len(ours) == 2 and all(_ids_ok(c) for c in ours), ours
        assert len(theirs) == 2 and all(_ids_ok(c) for c in theirs), theirs


def test_a_stream_one_token_off_is_caught_by_position(
    record: EndpointRecord, vllm_swapped: VllmServer
) -> None:
    """The generation prompt (the plan's last token) is another token at the server: the
    count is the same; the streamed ids name the position, in the middleware and in the
    callback (alone, and under the middleware)."""
    tok = load_tokenizer("reference")
    difference = (
        f"server id {tok.encode(SWAPPED_PROMPT)[0]}, phaseaware id {tok.encode(PLANNED_PROMPT)[0]}"
    )
    checks: list[Any] = []
    streamed = _model(vllm_swapped, clients=True, streaming=True, stream_usage=True)
    with pytest.warns(PhaseawareWarning, match="differ from phaseaware's at planned token"):
        _agent(streamed, record, checks, check_usage="warn").invoke(_state())
    with pytest.warns(PhaseawareWarning, match="differ from phaseaware's at planned token"):
        config: Any = {"callbacks": [_usage_check(record, checks, "warn")]}
        list(_chain(vllm_swapped, record, clients=True).stream(_inputs(), config=config))
    theirs: list[Any] = []
    agent = _agent(streamed, record, [], check_usage="ignore").with_config(
        callbacks=[_usage_check(record, theirs, "ignore")]
    )
    asyncio.run(agent.ainvoke(_state()))
    for check in (*checks, *theirs):
        assert check.ids_compared and check.drift == 0
        assert check.first_difference == check.planned_tokens - 1
        assert check.difference == difference
