"""``PhaseAwareUsageCheck`` on an LCEL chain, id for id over real HTTP.

``PhaseAwarePrompt | llm.bind(**place.model_kwargs(llm))`` against the suite's
OpenAI-compatible endpoint (``tests/support/endpoint_server.py``: real uvicorn on
127.0.0.1, the DeepSeek-V4 tokenizer and chat format), which returns the prompt's ids as
vLLM does where asked. The model's hook keeps each reply's body by response id
(``REPLIES``); the callback takes its own by the id ``ChatOpenAI`` keeps. The real vLLM
run is ``tests/e2e/vllm/test_langchain_prompt_ids.py``.
"""

from __future__ import annotations

import asyncio
from collections.abc import Iterator
from typing import Any

import httpx
import pytest

pytest.importorskip("langchain_openai")

from langchain_core.documents import Document  # noqa: E402
from langchain_core.prompts import ChatPromptTemplate  # noqa: E402
from langchain_openai import ChatOpenAI  # noqa: E402
from langchain_phaseaware import (  # noqa: E402
    PhaseAwarePrompt,
    PhaseAwareUsageCheck,
    prompt_ids_clients,
)
from langchain_phaseaware.served import REPLIES  # noqa: E402

from phaseaware.endpoints import EndpointRecord  # noqa: E402
from phaseaware.errors import PromptTokenDriftError  # noqa: E402
from phaseaware.tokenizers import load_tokenizer  # noqa: E402
from tests.support.endpoint_server import start_endpoint  # noqa: E402

TEMPLATE = ChatPromptTemplate.from_messages([("human", "{context}\n\n{question}")])
FILLER = "The harbor ledger lists amber crates and timber in the valley warehouse. "


def _documents(vaults: int) -> list[Document]:
    return [
        Document(page_content=f"{FILLER * 2}The code of vault V{k} is {4000 + k}-A.")
        for k in range(vaults)
    ]


@pytest.fixture(scope="module")
def deepseek() -> Any:
    return load_tokenizer("deepseek-v4")


@pytest.fixture(autouse=True)
def _no_kept_replies() -> Iterator[None]:
    """Each stand-in server numbers its replies from ``sim-0``: start with none kept."""
    REPLIES.clear()
    yield
    REPLIES.clear()


def _record(tok: Any) -> EndpointRecord:
    return EndpointRecord(
        base_url="http://127.0.0.1:9/v1", model="sim-model", offset=0, offsets=(0,),
        mode="count", stability="constant", date="2026-12-05T00:00:00Z", tokenizer_spec=tok.spec,
        tokenizer_fingerprint=tok.fingerprint(), chat_format="deepseek-v4", probes=3,
        tool_version="test", server="vllm 0.32.0",
    )  # fmt: skip


def _chain(tok: Any, base_url: str, *, clients: bool, after_ours: Any = None) -> Any:
    place = PhaseAwarePrompt(
        TEMPLATE, tokenizer=tok, chat_format="deepseek-v4", profile="deepseek-v4-flash-base",
        budget_tokens=2000, endpoint=_record(tok),
    )  # fmt: skip
    made = prompt_ids_clients() if clients else {}
    if after_ours is not None:  # an async response hook that runs after ours
        made["http_async_client"].event_hooks["response"].append(after_ours)
    llm = ChatOpenAI(
        base_url=base_url, api_key="x", model="sim-model", max_retries=0,  # type: ignore[arg-type]
        **made,
    )  # fmt: skip
    return place | llm.bind(**place.model_kwargs(llm))


def _check(tok: Any, checks: list[Any], on_mismatch: str = "raise") -> PhaseAwareUsageCheck:
    return PhaseAwareUsageCheck(
        tokenizer=tok, chat_format="deepseek-v4", endpoint=_record(tok),
        on_mismatch=on_mismatch, on_check=checks.append,  # type: ignore[arg-type]
    )  # fmt: skip


def _serve(tok: Any, bodies: list[dict[str, Any]], **kwargs: Any) -> Any:
    def answer(served: Any, body: dict[str, Any]) -> str:
        bodies.append(body)
        return "4000-A"

    running, _app = start_endpoint(
        tokenizer=tok, chat_format="deepseek-v4", answer=answer, **kwargs
    )
    return running


QUESTION = {"question": "What is the code of vault V0?", "documents": _documents(3)}


def test_the_callback_compares_the_ids_with_the_clients_and_the_count_without(
    deepseek: Any,
) -> None:
    checks: list[Any] = []
    bodies: list[dict[str, Any]] = []
    with _serve(deepseek, bodies) as running:
        _chain(deepseek, running.base_url, clients=True).invoke(
            QUESTION, config={"callbacks": [_check(deepseek, checks)]}
        )
        assert bodies[-1]["return_token_ids"] is True
        (check,) = checks
        assert check.ids_compared and check.first_difference is None and check.drift == 0
        assert len(REPLIES) == 0  # taken

        checks.clear()  # a plain ChatOpenAI: nothing asked, the count checked
        _chain(deepseek, running.base_url, clients=False).invoke(
            QUESTION, config={"callbacks": [_check(deepseek, checks)]}
        )
        assert "return_token_ids" not in bodies[-1]
        assert not checks[0].ids_compared and checks[0].drift == 0


def test_two_concurrent_async_chains_each_get_their_own_ids(
    deepseek: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Two chains of different prompts at once, one callback. A hook after ours holds each
    reply a while (each its own), so the bodies are kept together and taken in another
    order than they came. Were a reply's ids handed to another call, the counts or the
    positions would differ, and the check would raise."""
    checks: list[Any] = []
    bodies: list[dict[str, Any]] = []
    held: list[int] = []  # bodies kept at each take
    take = REPLIES.take

    def counting(reply_id: object, *, prompt_tokens: int | None) -> dict[str, Any] | None:
        held.append(len(REPLIES))
        return take(reply_id, prompt_tokens=prompt_tokens)

    monkeypatch.setattr(REPLIES, "take", counting)
    short = {"question": "What is the code of vault V1?", "documents": _documents(2)}
    long = {"question": "Which code opens vault V4?", "documents": _documents(6)}

    delays = iter([0.3, 0.1, 0.5, 0.0, 0.4, 0.2])  # the callbacks in another order

    async def hold(response: httpx.Response) -> None:
        await asyncio.sleep(next(delays))

    async def all_at_once(chain: Any, check: PhaseAwareUsageCheck) -> None:
        config: Any = {"callbacks": [check]}
        await asyncio.gather(*(chain.ainvoke(q, config=config) for q in (short, long) * 3))

    with _serve(deepseek, bodies) as running:
        chain = _chain(deepseek, running.base_url, clients=True, after_ours=hold)
        asyncio.run(all_at_once(chain, _check(deepseek, checks)))
    assert len(checks) == 6 and all(c.ids_compared and c.first_difference is None for c in checks)
    assert len({c.planned_tokens for c in checks}) == 2  # two prompts of different lengths
    assert max(held) > 1  # the replies were all kept together


def test_a_reused_response_id_is_handed_to_nobody(deepseek: Any) -> None:
    """A second server numbers its replies from ``sim-0`` again: the first server's reply
    ``sim-0`` was never taken (no callback), so ``sim-0`` is ambiguous and the count is
    checked, never the other reply's ids."""
    checks: list[Any] = []
    with _serve(deepseek, []) as first:
        _chain(deepseek, first.base_url, clients=True).invoke(QUESTION)  # no callback
    assert len(REPLIES) == 1
    with _serve(deepseek, []) as second:
        other = {"question": "And vault V2?", "documents": _documents(5)}
        _chain(deepseek, second.base_url, clients=True).invoke(
            other, config={"callbacks": [_check(deepseek, checks)]}
        )
    (check,) = checks
    assert not check.ids_compared and check.drift == 0


def test_one_token_off_is_caught_by_position_not_by_count(deepseek: Any) -> None:
    """The server writes ``<think>`` where the plan has ``</think>`` (the generation
    prompt's last token here): one token, the same count; the callback names the position."""
    edit = ("</think>", "<think>")
    checks: list[Any] = []
    with _serve(deepseek, [], template_edit=edit) as running:
        _chain(deepseek, running.base_url, clients=False).invoke(
            QUESTION, config={"callbacks": [_check(deepseek, checks)]}
        )
        assert not checks[0].ids_compared and checks[0].drift == 0  # the count cannot see it
        checks.clear()
        with pytest.warns(match="differ from phaseaware's at planned token"):
            _chain(deepseek, running.base_url, clients=True).invoke(
                QUESTION, config={"callbacks": [_check(deepseek, checks, "warn")]}
            )
        (check,) = checks
        think, end_think = deepseek.encode("<think>")[0], deepseek.encode("</think>")[0]
        assert check.ids_compared and check.drift == 0
        assert check.difference == f"server id {think}, phaseaware id {end_think}"
        assert check.first_difference == check.planned_tokens - 1
        with pytest.raises(
            PromptTokenDriftError, match=f"at planned token {check.first_difference} "
        ):
            _chain(deepseek, running.base_url, clients=True).invoke(
                QUESTION, config={"callbacks": [_check(deepseek, [])]}
            )


def test_model_kwargs_ask_only_where_the_model_hands_the_body_over(deepseek: Any) -> None:
    """vLLM: asked with the clients, not without (or with no model). SGLang refuses the
    field on a stream: asked only when the model cannot stream."""
    record = _record(deepseek)
    sglang = EndpointRecord(**{**record.to_dict(), "server": "sglang 0.5.23"})
    args: Any = {"base_url": "http://127.0.0.1:9/v1", "api_key": "x", "model": "m"}
    with_clients = ChatOpenAI(**args, **prompt_ids_clients())
    plain = ChatOpenAI(**args)
    for endpoint, field, asked in (
        (record, "return_token_ids", [True, False, False, True]),
        (sglang, "return_prompt_token_ids", [False, False, False, True]),
    ):
        place = PhaseAwarePrompt(
            TEMPLATE, tokenizer=deepseek, chat_format="deepseek-v4",
            profile="deepseek-v4-flash-base", budget_tokens=2000, endpoint=endpoint,
        )  # fmt: skip
        no_stream = with_clients.model_copy(update={"disable_streaming": True})
        made = [place.model_kwargs(m) for m in (with_clients, plain, None, no_stream)]
        assert [field in k.get("extra_body", {}) for k in made] == asked
