"""Streamed calls, and the middleware with the callback on one call, checked id for id.

The official ``ChatOpenAI`` (built with ``prompt_ids_clients()``) against the suite's
loopback OpenAI-compatible server (``tests/support/endpoint_server.py``: real uvicorn on
127.0.0.1, the DeepSeek-V4 tokenizer and chat format). It streams as vLLM 0.32 does: the
prompt's ids on the first chunk where ``return_token_ids`` asks, the usage chunk last,
each event cut across network pieces. It refuses SGLang's ids field on a stream, as SGLang
does. The real vLLM run of these checks: ``tests/e2e/vllm/test_langchain_stream_ids.py``.
"""

from __future__ import annotations

import asyncio
from collections.abc import Iterator
from typing import Any

import pytest

pytest.importorskip("langchain.agents")
pytest.importorskip("langchain_openai")

from langchain.agents import create_agent  # noqa: E402
from langchain_core.documents import Document  # noqa: E402
from langchain_core.messages import AIMessage  # noqa: E402
from langchain_core.prompts import ChatPromptTemplate  # noqa: E402
from langchain_openai import ChatOpenAI  # noqa: E402
from langchain_phaseaware import (  # noqa: E402
    PhaseAwareMiddleware,
    PhaseAwarePrompt,
    PhaseAwareUsageCheck,
    prompt_ids_clients,
)
from langchain_phaseaware.served import REPLIES, STREAMS_KEPT  # noqa: E402

from phaseaware.endpoints import EndpointRecord  # noqa: E402
from phaseaware.errors import PhaseawareWarning, PromptTokenDriftError  # noqa: E402
from tests.support.agent_states import FILLER, loopback_record, tool_result_state  # noqa: E402
from tests.support.endpoint_server import start_endpoint  # noqa: E402

VLLM, SGLANG = "vllm 0.32.0", "sglang 0.5.23"
TEMPLATE = ChatPromptTemplate.from_messages([("human", "{context}\n\n{question}")])
EDIT = ("</think>", "<think>")  # a server one token off: the same count, another id


@pytest.fixture(autouse=True)
def _no_kept_replies() -> Iterator[None]:
    """Each loopback server numbers its replies from ``sim-0``: start with none kept."""
    REPLIES.clear()
    yield
    REPLIES.clear()


def _record(tok: Any, server: str = VLLM) -> EndpointRecord:
    return loopback_record(tok, server)


class Served:
    """A loopback server and the request bodies it got."""

    def __init__(self, tok: Any, **kwargs: Any) -> None:
        self.bodies: list[dict[str, Any]] = []
        self.running, self.app = start_endpoint(
            tokenizer=tok, chat_format="deepseek-v4", answer=self._answer, **kwargs
        )

    def _answer(self, served: Any, body: dict[str, Any]) -> str:
        self.bodies.append(body)
        return "4000-A"

    def __enter__(self) -> Served:
        self.running.__enter__()
        return self

    def __exit__(self, *exc: object) -> None:
        self.running.__exit__(*exc)

    def model(self, *, clients: bool = True, **kwargs: Any) -> ChatOpenAI:
        return ChatOpenAI(
            base_url=self.running.base_url, api_key="x", model="sim-model",  # type: ignore[arg-type]
            max_retries=0, **(prompt_ids_clients() if clients else {}), **kwargs,
        )  # fmt: skip


def _middleware(tok: Any, checks: list[Any], server: str = VLLM, **kw: Any) -> Any:
    return PhaseAwareMiddleware(
        tokenizer=tok, chat_format="deepseek-v4", profile="deepseek-v4-flash-base",
        budget_tokens=4000, endpoint=_record(tok, server), tool_schemas="not_rendered",
        on_check=checks.append, **{"check_usage": "raise", **kw},
    )  # fmt: skip


def _state() -> dict[str, Any]:
    return tool_result_state()


def _usage(tok: Any, checks: list[Any], server: str = VLLM, **kw: Any) -> PhaseAwareUsageCheck:
    return PhaseAwareUsageCheck(
        tokenizer=tok, chat_format="deepseek-v4", endpoint=_record(tok, server),
        on_check=checks.append, **{"on_mismatch": "raise", **kw},
    )  # fmt: skip


def _chain(tok: Any, llm: ChatOpenAI, server: str = VLLM) -> Any:
    place = PhaseAwarePrompt(
        TEMPLATE, tokenizer=tok, chat_format="deepseek-v4", profile="deepseek-v4-flash-base",
        budget_tokens=2000, endpoint=_record(tok, server),
    )  # fmt: skip
    return place | llm.bind(**place.model_kwargs(llm))


def _inputs(vaults: int = 3, question: str = "What is the code of vault V0?") -> dict[str, Any]:
    docs = [
        Document(page_content=f"{FILLER * 2}The code of vault V{k} is {4000 + k}-A.")
        for k in range(vaults)
    ]
    return {"question": question, "documents": docs}


def _ids_ok(check: Any) -> bool:
    return bool(check.ids_compared and check.first_difference is None and check.drift == 0)


# --- the middleware ------------------------------------------------------------------


def test_the_middleware_compares_a_streamed_replys_ids(deepseek_v4_tok: Any) -> None:
    """``streaming=True``, sync and async, with and without the usage chunk; and the agent
    streamed (``stream_mode="messages"``) with a model that does not stream by itself."""
    checks: list[Any] = []
    with Served(deepseek_v4_tok) as served:
        for usage in (True, False):
            model = served.model(streaming=True, stream_usage=usage)
            agent = create_agent(model, tools=[], middleware=[_middleware(deepseek_v4_tok, checks)])
            state = agent.invoke(_state())
            assert "phaseaware" in state["messages"][2].response_metadata  # aligned
            asyncio.run(agent.ainvoke(_state()))
        agent = create_agent(
            served.model(stream_usage=True), tools=[],
            middleware=[_middleware(deepseek_v4_tok, checks)],
        )  # fmt: skip
        streamed = list(agent.stream(_state(), stream_mode="messages"))
        assert any(m.content for m, _ in streamed if isinstance(m, AIMessage))
    assert [b["stream"] for b in served.bodies] == [True] * 5
    assert all(b["return_token_ids"] is True for b in served.bodies)
    assert len(checks) == 5 and all(_ids_ok(c) for c in checks)


def test_a_stream_one_token_off_is_caught_by_position(deepseek_v4_tok: Any) -> None:
    checks: list[Any] = []
    with Served(deepseek_v4_tok, template_edit=EDIT) as served:
        warned = _middleware(deepseek_v4_tok, checks, check_usage="warn")
        agent = create_agent(served.model(streaming=True), tools=[], middleware=[warned])
        with pytest.warns(PhaseawareWarning, match="differ from phaseaware's at planned token"):
            agent.invoke(_state())
        (check,) = checks
        assert check.ids_compared and check.drift == 0 and check.first_difference is not None
        think, end_think = (
            deepseek_v4_tok.encode("<think>")[0],
            deepseek_v4_tok.encode("</think>")[0],
        )
        assert check.difference == f"server id {think}, phaseaware id {end_think}"
        raising = create_agent(
            served.model(streaming=True), tools=[], middleware=[_middleware(deepseek_v4_tok, [])]
        )
        with pytest.raises(
            PromptTokenDriftError, match=f"at planned token {check.first_difference} "
        ):
            asyncio.run(raising.ainvoke(_state()))


def test_sglang_streams_are_counted_and_the_check_says_why(deepseek_v4_tok: Any) -> None:
    """SGLang refuses its ids field on a stream: a streamed call asks nothing, its check is
    by count and says so (in the result, and in the warning on a mismatch)."""
    checks: list[Any] = []
    with Served(deepseek_v4_tok) as served:
        model = served.model(streaming=True, stream_usage=True)
        agent = create_agent(
            model, tools=[], middleware=[_middleware(deepseek_v4_tok, checks, SGLANG)]
        )
        agent.invoke(_state())
        assert "return_prompt_token_ids" not in served.bodies[-1]
        (check,) = checks
        assert not check.ids_compared and check.drift == 0
        assert check.count_only_reason == (
            "sglang refuses return_prompt_token_ids on a streamed request, so no ids were "
            "asked for (a chat model with disable_streaming=True asks)"
        )
    with Served(deepseek_v4_tok, hidden_prefix=lambda i: "Today is Friday. ") as served:
        warned = _middleware(deepseek_v4_tok, checks, SGLANG, check_usage="warn")
        model = served.model(streaming=True, stream_usage=True)
        agent = create_agent(model, tools=[], middleware=[warned])
        with pytest.warns(PhaseawareWarning, match=r"drift \+\d+.*\(count only: sglang refuses"):
            agent.invoke(_state())


def test_a_count_only_check_names_why(deepseek_v4_tok: Any) -> None:
    checks: list[Any] = []
    with Served(deepseek_v4_tok) as served:
        for model in (served.model(clients=False), served.model(clients=False, streaming=True,
                                                              stream_usage=True)):  # fmt: skip
            agent = create_agent(model, tools=[], middleware=[_middleware(deepseek_v4_tok, checks)])
            agent.invoke(_state())
    assert [c.ids_compared for c in checks] == [False, False]
    assert all("build it with ChatOpenAI(**prompt_ids_clients())" in c.count_only_reason
               for c in checks)  # fmt: skip


# --- the callback on a chain -----------------------------------------------------------


def test_the_callback_compares_a_streamed_chains_ids(deepseek_v4_tok: Any) -> None:
    """``chain.stream`` / ``astream`` with ``PhaseAwareUsageCheck``: the ids of the stream's
    first chunk, taken from the call's own context (a stream has no id at the callback)."""
    checks: list[Any] = []
    with Served(deepseek_v4_tok) as served:
        for usage in (True, False):
            chain = _chain(deepseek_v4_tok, served.model(stream_usage=usage))
            config: Any = {"callbacks": [_usage(deepseek_v4_tok, checks)]}
            assert "".join(c.content for c in chain.stream(_inputs(), config=config)) == "4000-A"

            async def both(chain: Any = chain, config: Any = config) -> None:
                async for _chunk in chain.astream(_inputs(4), config=config):
                    pass
                await chain.ainvoke(_inputs(2), config=config)  # not streamed: by id

            asyncio.run(both())
    assert all(b["return_token_ids"] is True for b in served.bodies)
    assert [b.get("stream", False) for b in served.bodies] == [True, True, False] * 2
    assert len(checks) == 6 and all(_ids_ok(c) for c in checks)


def test_two_concurrent_streamed_chains_each_get_their_own_ids(deepseek_v4_tok: Any) -> None:
    checks: list[Any] = []
    with Served(deepseek_v4_tok) as served:
        chain = _chain(deepseek_v4_tok, served.model(stream_usage=True))
        config: Any = {"callbacks": [_usage(deepseek_v4_tok, checks)]}

        async def drain(inputs: dict[str, Any]) -> None:
            async for _chunk in chain.astream(inputs, config=config):
                await asyncio.sleep(0)

        async def all_at_once() -> None:
            await asyncio.gather(*(drain(_inputs(n)) for n in (2, 6) * 3))

        asyncio.run(all_at_once())
    assert len(checks) == 6 and all(_ids_ok(c) for c in checks)
    assert len({c.planned_tokens for c in checks}) == 2


def test_two_streams_interleaved_in_one_task(deepseek_v4_tok: Any) -> None:
    """Two chains streamed in turns in one task: LangChain runs each chain's steps in a
    context of its own, so each takes its own reply. Two model streams read in turns in
    one task share its context: the first call sees two replies after its start (its own
    and the second's), so it takes none and is counted, saying why; the second started
    after the first's reply came, so it sees its own only."""
    checks: list[Any] = []
    with Served(deepseek_v4_tok) as served:
        chain = _chain(deepseek_v4_tok, served.model(stream_usage=True))
        config: Any = {"callbacks": [_usage(deepseek_v4_tok, checks)]}

        async def in_turns(first: Any, second: Any) -> None:
            await first.__anext__()
            await second.__anext__()
            for stream in (first, second):
                async for _chunk in stream:
                    pass

        asyncio.run(
            in_turns(chain.astream(_inputs(2), config=config),
                     chain.astream(_inputs(5), config=config))
        )  # fmt: skip
        assert len(checks) == 2 and all(_ids_ok(c) for c in checks)
        checks.clear()
        prompt, model = chain.first, chain.last  # the placed messages; the bound model
        short, long = prompt.invoke(_inputs(2)), prompt.invoke(_inputs(5))
        asyncio.run(
            in_turns(model.astream(short, config=config), model.astream(long, config=config))
        )
    first, second = checks  # in the order they ended
    assert not first.ids_compared and first.drift == 0
    assert "no reply carrying them" in first.count_only_reason
    assert _ids_ok(second) and second.planned_tokens > first.planned_tokens


def test_an_earlier_stream_is_never_taken_by_a_later_call(deepseek_v4_tok: Any) -> None:
    """Streams with no callback are kept in the context (at most ``STREAMS_KEPT``); a later
    call whose model has no hooks gets none of them: they arrived before it started."""
    checks: list[Any] = []
    with Served(deepseek_v4_tok) as served:
        hooked = _chain(deepseek_v4_tok, served.model(stream_usage=True))
        for _ in range(STREAMS_KEPT + 1):
            list(hooked.stream(_inputs()))  # no callback: nobody takes them
        plain = served.model(clients=False, stream_usage=True)
        bound = plain.bind(extra_body={"return_token_ids": True})  # asks, but keeps nothing
        prompt = _chain(deepseek_v4_tok, plain).first
        chain = prompt | bound
        list(chain.stream(_inputs(), config={"callbacks": [_usage(deepseek_v4_tok, checks)]}))
    (check,) = checks
    assert not check.ids_compared and check.drift == 0
    assert "no reply carrying them was kept" in check.count_only_reason


def test_sglang_chain_streams_are_counted_and_say_why(deepseek_v4_tok: Any) -> None:
    checks: list[Any] = []
    with Served(deepseek_v4_tok) as served:
        chain = _chain(deepseek_v4_tok, served.model(stream_usage=True), SGLANG)
        list(
            chain.stream(_inputs(), config={"callbacks": [_usage(deepseek_v4_tok, checks, SGLANG)]})
        )
        assert "return_prompt_token_ids" not in served.bodies[-1]
        no_stream = served.model(disable_streaming=True)
        chain = _chain(deepseek_v4_tok, no_stream, SGLANG)
        chain.invoke(_inputs(), config={"callbacks": [_usage(deepseek_v4_tok, checks, SGLANG)]})
        assert served.bodies[-1]["return_prompt_token_ids"] is True
    counted, by_ids = checks
    assert not counted.ids_compared and counted.drift == 0
    assert counted.count_only_reason.startswith(
        "sglang refuses return_prompt_token_ids on a streamed request"
    )
    assert _ids_ok(by_ids) and by_ids.count_only_reason == ""


# --- the middleware and the callback on one call ----------------------------------------


def test_the_middleware_and_the_callback_both_compare_ids(deepseek_v4_tok: Any) -> None:
    """The reply is in the middleware's capture; the callback takes it from its context
    (by the reply's id where it has one, else the one after its start): both compare ids,
    streamed or not, sync or async."""
    with Served(deepseek_v4_tok) as served:
        for streaming in (False, True):
            ours: list[Any] = []
            theirs: list[Any] = []
            model = served.model(streaming=streaming, stream_usage=True)
            agent = create_agent(
                model, tools=[], middleware=[_middleware(deepseek_v4_tok, ours)]
            ).with_config(callbacks=[_usage(deepseek_v4_tok, theirs)])
            agent.invoke(_state())
            asyncio.run(agent.ainvoke(_state()))
            assert len(ours) == 2 and all(_ids_ok(c) for c in ours)
            assert len(theirs) == 2 and all(_ids_ok(c) for c in theirs)
            assert [c.planned_tokens for c in theirs] == [c.planned_tokens for c in ours]


def test_the_callback_under_the_middleware_catches_one_token_off(deepseek_v4_tok: Any) -> None:
    with Served(deepseek_v4_tok, template_edit=EDIT) as served:
        for streaming in (False, True):
            theirs: list[Any] = []
            middleware = _middleware(deepseek_v4_tok, [], check_usage="ignore")
            agent = create_agent(
                served.model(streaming=streaming), tools=[], middleware=[middleware]
            ).with_config(callbacks=[_usage(deepseek_v4_tok, theirs, on_mismatch="warn")])
            with pytest.warns(PhaseawareWarning, match="differ from phaseaware's at planned"):
                agent.invoke(_state())
            (check,) = theirs
            assert check.ids_compared and check.drift == 0 and check.first_difference is not None
