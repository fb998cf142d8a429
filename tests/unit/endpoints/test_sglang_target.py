"""SGLang as a target: its identity, the record's renderer and effort texts, and the plan's
settings from them (the render itself: tests/e2e/sglang)."""

from __future__ import annotations

import dataclasses
from typing import Any

import pytest

from phaseaware.endpoints import EndpointRecord
from phaseaware.endpoints.effort_texts import effort_texts_of
from phaseaware.endpoints.request_settings import chat_template_kwargs, record_settings
from phaseaware.endpoints.server import identify
from phaseaware.errors import InputError, PhaseawareWarning
from phaseaware.tokenizers import load_tokenizer

RECORD = EndpointRecord(
    base_url="http://127.0.0.1:30000/v1", model="m", offset=0, offsets=(0,), mode="count",
    stability="constant", date="2026-12-04T00:00:00+00:00", tokenizer_spec="deepseek-v4",
    tokenizer_fingerprint="f", chat_format="deepseek-v4", probes=19, tool_version="0",
)  # fmt: skip


class _Client:
    """``with_options(...).get(url)``: the JSON of ``routes``, else an API error."""

    def __init__(self, routes: dict[str, Any]) -> None:
        self.routes, self.asked = routes, []

    def with_options(self, **_: Any) -> _Client:
        return self

    def get(self, url: str, cast_to: Any) -> Any:
        import httpx
        import openai

        self.asked.append(url)
        if url in self.routes:
            return self.routes[url]
        request = httpx.Request("GET", url)
        raise openai.NotFoundError("404", response=httpx.Response(404, request=request), body=None)


def test_sglang_is_recognised_by_its_server_info_with_the_recipe_renderer() -> None:
    info = {"version": "0.5.23", "model_path": "deepseek-ai/DeepSeek-V4-Flash"}
    client = _Client({"http://h:1/server_info": info})
    found, requests = identify(client, "http://h:1/v1")  # type: ignore[arg-type]
    assert found is not None and (found.name, found.renderer) == ("sglang 0.5.23", "sglang")
    assert requests == 3
    older = _Client({"http://h:1/get_server_info": info})  # the deprecated spelling only
    found, requests = identify(older, "http://h:1/v1")  # type: ignore[arg-type]
    assert found is not None and found.name == "sglang 0.5.23" and requests == 4
    other = _Client({"http://h:1/server_info": {"version": "1.0"}})  # not SGLang's answer
    assert identify(other, "http://h:1/v1") == (None, 4)  # type: ignore[arg-type]
    vllm = _Client({"http://h:1/version": {"version": "0.32.0"}})
    found, requests = identify(vllm, "http://h:1/v1")  # type: ignore[arg-type]
    assert found is not None and (found.name, found.renderer, requests) == ("vllm 0.32.0", None, 5)


def test_renderer_and_effort_texts_round_trip_and_reach_the_plan() -> None:
    sglang = dataclasses.replace(RECORD, renderer="sglang", effort_texts="0731")
    assert EndpointRecord.from_dict(sglang.to_dict()) == sglang
    assert "renderer" not in RECORD.to_dict() and "effort_texts" not in RECORD.to_dict()
    settings = record_settings(sglang)
    assert (settings.renderer, settings.effort_texts) == ("sglang", "0731")
    v41 = dataclasses.replace(sglang, chat_format="deepseek-v4.1")
    assert record_settings(v41).effort_texts is None  # V4's setting only
    assert record_settings(dataclasses.replace(sglang, chat_format="hf")).renderer is None
    with pytest.raises(InputError, match="renderer must be vllm or sglang"):
        dataclasses.replace(RECORD, renderer="tgi")


def test_an_sglang_request_states_thinking_and_the_effort_sglang_reads() -> None:
    assert chat_template_kwargs(chat_format="deepseek-v4", thinking=True, renderer="sglang") == {
        "thinking": True, "enable_thinking": True, "reasoning_effort": "high"}  # fmt: skip
    assert chat_template_kwargs(chat_format="deepseek-v4", renderer="sglang") == {
        "thinking": False, "enable_thinking": False}  # fmt: skip


def test_effort_texts_are_told_apart_by_one_count() -> None:
    tok = load_tokenizer("deepseek-v4")
    from phaseaware.chat.settings import ChatSettings
    from phaseaware.endpoints.prompts import probe_prompts

    def length(texts: str) -> int:
        settings = ChatSettings(thinking=True, reasoning_effort="high", effort_texts=texts)
        return len(probe_prompts(tok, "deepseek-v4", settings=settings)[1].ids)

    def found(counted: int, *, exact: bool) -> str | None:
        return effort_texts_of(
            tokenizer=tok, offset=2, count=lambda _: counted, where="x", exact=exact
        )

    assert length("0731") > length("preview")
    assert found(length("0731") + 2, exact=False) == "0731"
    assert found(length("preview") + 2, exact=True) == "preview"
    assert found(length("preview") + 2, exact=False) is None  # also a server ignoring settings
    with pytest.warns(PhaseawareWarning, match="no known effort texts"):
        assert found(length("0731") + 9, exact=True) is None
