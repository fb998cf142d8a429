"""``PhaseAwareMiddleware`` checks the prompt id for id at a real vLLM, through ``ChatOpenAI``.

The agent runs on the real ``ChatOpenAI``, built with ``prompt_ids_clients()``, against vLLM
0.32 serving the reference model's tokenizer and chat template. The endpoint record (a real
``probe-endpoint``) names the server, so each aligned call sends ``return_token_ids`` and
vLLM returns ``prompt_token_ids``. The httpx hook keeps the reply body, and the middleware
compares those ids with its plan (``on_check`` gets ``ids_compared=True``).

The chain path is the same check from ``PhaseAwareUsageCheck``: the hook keeps each reply
by its response id, and the callback takes its own (two concurrent async chains included).

The control is a second vLLM whose template writes one token differently: the generation
prompt is ``<|user|>`` where the plan has ``<|assistant|>``. The count is the same, so the
count check alone passes it. The id check refuses it and names the position.
"""

from __future__ import annotations

import asyncio
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from phaseaware.demo.rag_questions import make_questions
from phaseaware.endpoints import EndpointRecord, probe_endpoint
from phaseaware.errors import PhaseawareWarning, PromptTokenDriftError
from phaseaware.tokenizers import load_tokenizer
from tests.e2e.vllm.conftest import _OneAtATime, _server
from tests.support.vllm_server import VllmServer, reference_files

pytest.importorskip("langchain.agents")
pytest.importorskip("langchain_openai")

# texts in the reference tokenizer's vocabulary (no unknown-word id hides a difference)
QUESTION, OTHER_QUESTION = make_questions(
    count=2, seed=40_000, chunks_per_question=4, max_filler_sentences=3
)
PLANNED_PROMPT = " <|assistant|>"  # the reference template's generation prompt (one token)
SWAPPED_PROMPT = " <|user|>"  # one other token: the same count


def _reference(pool: _OneAtATime, factory: pytest.TempPathFactory) -> VllmServer:
    return pool.get(
        "reference",
        lambda: _server(factory, "reference", reference_files(), mode=None, scale_out=True),
    )


@pytest.fixture(scope="module")
def record(_one_at_a_time: _OneAtATime, tmp_path_factory: pytest.TempPathFactory) -> EndpointRecord:
    server = _reference(_one_at_a_time, tmp_path_factory)
    found = probe_endpoint(
        base_url=server.base_url, model=server.model, tokenizer="reference", chat_format="hf",
        mode="exact", directory=tmp_path_factory.mktemp("records"),
    )  # fmt: skip
    assert found.server is not None and found.server.startswith("vllm ")
    return found


@pytest.fixture
def vllm_swapped(
    _one_at_a_time: _OneAtATime, tmp_path_factory: pytest.TempPathFactory
) -> VllmServer:
    """vLLM with the reference template, its generation prompt one token off."""

    def start() -> Iterator[VllmServer]:
        source = tmp_path_factory.mktemp("reference-swapped")
        for name in ("tokenizer.json", "tokenizer_config.json"):
            (source / name).write_bytes((reference_files() / name).read_bytes())
        template = (reference_files() / "chat_template.jinja").read_text(encoding="utf-8")
        assert template.count(f"{{{{ '{PLANNED_PROMPT}' }}}}") == 1
        swapped = template.replace(f"{{{{ '{PLANNED_PROMPT}' }}}}", f"{{{{ '{SWAPPED_PROMPT}' }}}}")
        (source / "chat_template.jinja").write_text(swapped, encoding="utf-8")
        yield from _server(tmp_path_factory, "reference-swapped", Path(source), mode=None)

    return _one_at_a_time.get("reference-swapped", start)


def _model(server: VllmServer, *, clients: bool, **model_args: Any) -> Any:
    from langchain_openai import ChatOpenAI
    from langchain_phaseaware import prompt_ids_clients

    extra = {**(prompt_ids_clients() if clients else {}), **model_args}
    return ChatOpenAI(
        base_url=server.base_url, model=server.model, api_key="EMPTY",  # type: ignore[arg-type]
        max_tokens=1, temperature=0, max_retries=0, **extra,
    )  # fmt: skip


def _agent(
    model: Any, record: EndpointRecord, checks: list[Any], *, check_usage: str = "raise"
) -> Any:
    from langchain.agents import create_agent
    from langchain_phaseaware import PhaseAwareMiddleware

    middleware = PhaseAwareMiddleware(
        tokenizer="reference", chat_format="hf", endpoint=record, budget_tokens=400,
        tool_role="user",  # the reference template has no tool role
        tool_schemas="not_rendered", check_usage=check_usage, on_check=checks.append,
    )  # fmt: skip
    return create_agent(model, tools=[], middleware=[middleware])


def _state() -> dict[str, Any]:
    """A conversation ending in a tool result, so the first model call aligns it."""
    from langchain_core.messages import AIMessage, HumanMessage, ToolMessage

    call = {"name": "search", "args": {"q": QUESTION.key_name}, "id": "call_1", "type": "tool_call"}
    return {
        "messages": [
            HumanMessage(content=QUESTION.question, id="h1"),
            AIMessage(content="", tool_calls=[call], id="a1"),
            ToolMessage(
                content="\n\n".join(c.text for c in QUESTION.chunks), tool_call_id="call_1", id="t1"
            ),
        ]
    }


def test_the_middleware_compares_vllms_prompt_ids(
    _one_at_a_time: _OneAtATime, tmp_path_factory: pytest.TempPathFactory, record: EndpointRecord
) -> None:
    server = _reference(_one_at_a_time, tmp_path_factory)
    checks: list[Any] = []
    state = _agent(_model(server, clients=True), record, checks).invoke(_state())
    assert "phaseaware" in state["messages"][2].response_metadata  # aligned
    assert len(checks) == 1 and checks[0].ids_compared and checks[0].first_difference is None
    assert checks[0].drift == 0 and checks[0].planned_tokens > 80

    # the async path (httpx's async hook, the task's context) compares ids too
    checks.clear()
    asyncio.run(_agent(_model(server, clients=True), record, checks).ainvoke(_state()))
    assert len(checks) == 1 and checks[0].ids_compared and checks[0].first_difference is None

    # a streamed call: vLLM takes the field there too and sends the ids on the first chunk,
    # which the hooks read as the client reads the stream (more: test_langchain_stream_ids.py)
    checks.clear()
    streamed = _model(server, clients=True, streaming=True, stream_usage=True)
    _agent(streamed, record, checks).invoke(_state())
    assert len(checks) == 1 and checks[0].ids_compared and checks[0].first_difference is None
    assert checks[0].drift == 0

    # without the clients ChatOpenAI drops the ids: the count is checked, as before
    checks.clear()
    _agent(_model(server, clients=False), record, checks).invoke(_state())
    assert len(checks) == 1 and not checks[0].ids_compared and checks[0].drift == 0


def _chain(server: VllmServer, record: EndpointRecord, *, clients: bool) -> Any:
    """``PhaseAwarePrompt | llm.bind(**place.model_kwargs(llm))``: the LCEL path."""
    from langchain_core.prompts import ChatPromptTemplate
    from langchain_phaseaware import PhaseAwarePrompt

    place = PhaseAwarePrompt(
        ChatPromptTemplate.from_messages([("human", "{context}\n\n{question}")]),
        tokenizer="reference", chat_format="hf", endpoint=record, budget_tokens=400,
    )  # fmt: skip
    llm = _model(server, clients=clients)
    return place | llm.bind(**place.model_kwargs(llm))


def _usage_check(record: EndpointRecord, checks: list[Any], on_mismatch: Any = "raise") -> Any:
    from langchain_phaseaware import PhaseAwareUsageCheck

    return PhaseAwareUsageCheck(
        tokenizer="reference", chat_format="hf", endpoint=record, on_mismatch=on_mismatch,
        on_check=checks.append,
    )  # fmt: skip


def _inputs(question: Any = QUESTION) -> dict[str, Any]:
    from langchain_core.documents import Document

    docs = [Document(page_content=c.text, metadata={"score": c.score}) for c in question.chunks]
    return {"question": question.question, "documents": docs}


def test_a_chains_usage_check_compares_vllms_prompt_ids(
    _one_at_a_time: _OneAtATime,
    tmp_path_factory: pytest.TempPathFactory,
    record: EndpointRecord,
) -> None:
    """``PhaseAwareUsageCheck`` on a chain: the model's hook keeps vLLM's reply by its
    response id, the callback takes it by the id ``ChatOpenAI`` keeps, sync and async."""
    server = _reference(_one_at_a_time, tmp_path_factory)
    checks: list[Any] = []
    _chain(server, record, clients=True).invoke(
        _inputs(), config={"callbacks": [_usage_check(record, checks)]}
    )
    assert len(checks) == 1 and checks[0].ids_compared and checks[0].first_difference is None
    assert checks[0].drift == 0 and checks[0].planned_tokens > 80

    checks.clear()  # two async chains at once: each gets its own reply's ids
    chain = _chain(server, record, clients=True)
    config: Any = {"callbacks": [_usage_check(record, checks)]}

    async def both() -> None:
        runs = (chain.ainvoke(_inputs(q), config=config) for q in (QUESTION, OTHER_QUESTION))
        await asyncio.gather(*runs)

    asyncio.run(both())
    assert len(checks) == 2 and all(c.ids_compared and c.first_difference is None for c in checks)
    assert len({c.planned_tokens for c in checks}) == 2

    checks.clear()  # a plain ChatOpenAI: nothing asked, the count checked
    _chain(server, record, clients=False).invoke(
        _inputs(), config={"callbacks": [_usage_check(record, checks)]}
    )
    assert len(checks) == 1 and not checks[0].ids_compared and checks[0].drift == 0


def test_a_template_one_token_off_is_caught_by_position(
    record: EndpointRecord, vllm_swapped: VllmServer
) -> None:
    checks: list[Any] = []
    # the count alone cannot see it: the same number of tokens (only vLLM's fingerprint
    # differs, as it does for any other server folder: the identity check warns apart)
    with pytest.warns(PhaseawareWarning, match="served checkpoint changed"):
        _agent(_model(vllm_swapped, clients=False), record, checks).invoke(_state())
    assert len(checks) == 1 and not checks[0].ids_compared and checks[0].drift == 0

    # the ids can: the generation prompt, the plan's last token, is another token
    checks.clear()
    warned = _agent(_model(vllm_swapped, clients=True), record, checks, check_usage="warn")
    with pytest.warns(PhaseawareWarning, match="differ from phaseaware's at planned token"):
        warned.invoke(_state())
    (check,) = checks
    assert check.ids_compared and check.drift == 0
    last = check.planned_tokens - 1
    tok = load_tokenizer("reference")
    assert check.first_difference == last
    assert check.difference == (
        f"server id {tok.encode(SWAPPED_PROMPT)[0]}, phaseaware id {tok.encode(PLANNED_PROMPT)[0]}"
    )
    with pytest.raises(PromptTokenDriftError, match=f"at planned token {last} "):
        _agent(_model(vllm_swapped, clients=True), record, []).invoke(_state())


def test_a_chains_usage_check_catches_a_template_one_token_off_by_position(
    record: EndpointRecord, vllm_swapped: VllmServer
) -> None:
    """The chain path against the swapped template: the count passes it, the ids name the
    position (the generation prompt, the plan's last token)."""
    checks: list[Any] = []
    with pytest.warns(PhaseawareWarning, match="served checkpoint changed"):
        _chain(vllm_swapped, record, clients=False).invoke(
            _inputs(), config={"callbacks": [_usage_check(record, checks)]}
        )
    assert len(checks) == 1 and not checks[0].ids_compared and checks[0].drift == 0
    checks.clear()
    with pytest.warns(PhaseawareWarning, match="differ from phaseaware's at planned token"):
        _chain(vllm_swapped, record, clients=True).invoke(
            _inputs(), config={"callbacks": [_usage_check(record, checks, "warn")]}
        )
    (check,) = checks
    last = check.planned_tokens - 1
    tok = load_tokenizer("reference")
    assert check.ids_compared and check.drift == 0 and check.first_difference == last
    assert check.difference == (
        f"server id {tok.encode(SWAPPED_PROMPT)[0]}, phaseaware id {tok.encode(PLANNED_PROMPT)[0]}"
    )
    with pytest.raises(PromptTokenDriftError, match=f"at planned token {last} "):
        _chain(vllm_swapped, record, clients=True).invoke(
            _inputs(), config={"callbacks": [_usage_check(record, [])]}
        )


def test_deepseek_v4_with_thinking_and_a_bound_tool_is_checked_id_for_id(
    vllm_v4: VllmServer, tmp_path_factory: pytest.TempPathFactory
) -> None:
    """DeepSeek-V4 at vLLM's own renderer: thinking at ``max`` (its effort text) and the
    bound tool's schema, stated by the middleware, come back as the plan's ids."""
    from langchain.agents import create_agent
    from langchain_core.tools import tool
    from langchain_phaseaware import PhaseAwareMiddleware

    from phaseaware.chat import ChatSettings

    @tool
    def search(q: str) -> str:
        """Search the notes."""
        return "\n\n".join(c.text for c in QUESTION.chunks)

    v4_record = probe_endpoint(
        base_url=vllm_v4.base_url, model=vllm_v4.model, tokenizer="deepseek-v4",
        chat_format="deepseek-v4", mode="exact", directory=tmp_path_factory.mktemp("v4"),
    )  # fmt: skip
    checks: list[Any] = []
    middleware = PhaseAwareMiddleware(
        tokenizer="deepseek-v4", chat_format="deepseek-v4", profile="deepseek-v4-flash-base",
        budget_tokens=2000, endpoint=v4_record, check_usage="raise", on_check=checks.append,
        settings=ChatSettings(thinking=True, reasoning_effort="max"),
    )  # fmt: skip
    agent = create_agent(_model(vllm_v4, clients=True), tools=[search], middleware=[middleware])
    agent.invoke(_state())
    (check,) = checks
    assert check.ids_compared and check.first_difference is None and check.drift == 0
