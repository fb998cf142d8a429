"""Token ids from the server: returned prompt ids in the usage check, the render route's
token offsets, the V4.1 effort table the probe detects, and the defaults table.

The server's side of the effort-table test is the independent transliteration of the
V4.1 encoder (``tests/support/deepseek_reference.py``) with SGLang's table; no server
here uses it (vLLM 0.32 hard-codes the other), so nothing real fits.
"""

from __future__ import annotations

import warnings
from typing import Any

import pytest

from phaseaware.chat import ChatSettings, get_chat_format, parse_messages
from phaseaware.endpoints import (
    PROMPT_IDS_FIELDS,
    EndpointRecord,
    check_prompt_ids,
    check_response,
    reported_prompt_ids,
)
from phaseaware.endpoints.defaults import SERVER_DEFAULTS, server_default_for
from phaseaware.endpoints.probe_ids import IdsRoute, effort_table_of, server_ids
from phaseaware.endpoints.prompts import probe_prompts
from phaseaware.endpoints.render_route import RenderedIds, check_offsets, render_url
from phaseaware.endpoints.request_settings import record_settings
from phaseaware.errors import PhaseawareWarning, PromptTokenDriftError
from phaseaware.tokenizers import load_tokenizer
from tests.support.deepseek_reference import reference_render

TOK = load_tokenizer("deepseek-v4")


def test_returned_prompt_ids_are_compared_not_only_counted() -> None:
    planned = TOK.encode("<｜begin▁of▁sentence｜><｜User｜>q<｜Assistant｜><think>")
    other = TOK.encode("<｜begin▁of▁sentence｜><｜User｜>q<｜Assistant｜></think>")
    assert len(planned) == len(other)
    response = {"usage": {"prompt_tokens": len(other)}, "prompt_token_ids": other}
    assert reported_prompt_ids(response) == tuple(other)
    # the count alone agrees; the ids do not, and the check says where
    assert check_response(response, planned_tokens=len(planned)).ok  # type: ignore[union-attr]
    with pytest.raises(PromptTokenDriftError, match=f"at planned token {len(planned) - 1}"):
        check_response(response, planned_tokens=0, planned_ids=planned, on_mismatch="raise")
    same = check_prompt_ids(planned_ids=planned, reported_ids=[7, *planned], offset=1)
    assert same.ok and same.ids_compared and same.first_difference is None
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        short = check_prompt_ids(planned_ids=planned, reported_ids=planned[:-1])
    assert not short.ok and any(issubclass(w.category, PhaseawareWarning) for w in caught)
    # no ids in the response: the count check, as before
    assert reported_prompt_ids({"usage": {"prompt_tokens": 3}}) is None
    assert PROMPT_IDS_FIELDS == {"vllm": "return_token_ids", "sglang": "return_prompt_token_ids"}


def test_render_offsets_are_checked_against_phaseaware_tokens() -> None:
    text = "<｜User｜>Hello wörld 数据"
    local = TOK.tokenize(text)
    spans = tuple(local.char_span(i) for i in range(len(local)))
    agree = check_offsets(local, RenderedIds(local.ids, spans))
    assert agree.startswith("token offsets agree")
    # an HF fast tokenizer may trim a token's leading space: still inside phaseaware's token
    trimmed = tuple((a + 1, b) if text[a] == " " else (a, b) for a, b in spans)
    assert check_offsets(local, RenderedIds(local.ids, trimmed)).startswith("token offsets agree")
    shifted = tuple((a + 2, b + 2) for a, b in spans)
    assert "differ at token" in check_offsets(local, RenderedIds(local.ids, shifted))
    assert "none returned" in check_offsets(local, RenderedIds(local.ids, None))
    # a leading token of the server's own (a BOS) is skipped
    bos = RenderedIds((0, *local.ids), ((0, 0), *spans))
    assert check_offsets(local, bos).startswith("token offsets agree")
    assert render_url("http://h:8000/v1") == "http://h:8000/v1/chat/completions/render"
    assert render_url("http://h:8000") == "http://h:8000/v1/chat/completions/render"


def _server_with_table(table: str) -> IdsRoute:
    """A server's ids for the probe's chat requests, rendered by the transliterated V4.1
    encoder with ``table`` (the request's thinking and effort as vLLM reads them)."""

    def tokenize(prompt: Any, kwargs: dict[str, Any] | None) -> list[int]:
        kwargs = kwargs or {}
        text = reference_render(
            list(prompt.messages),
            v41=True,
            thinking=bool(kwargs.get("thinking", True)),
            effort=kwargs.get("reasoning_effort"),
            table=table,
        )
        return TOK.encode(text)

    return IdsRoute(tokenize, render=False)


@pytest.mark.parametrize("table", ["low50-high75", "low25-high50"])
def test_probe_detects_the_v41_effort_table_by_ids(table: str) -> None:
    route = _server_with_table(table)
    found = effort_table_of(None, "m", "http://127.0.0.1:1/v1", TOK, 0, route)  # type: ignore[arg-type]
    assert found == table and route.name == "tokenize"
    # the budgets are one token each: the counts never tell the tables apart
    low = {
        name: len(probe_prompts(TOK, "deepseek-v4.1", settings=ChatSettings(
            thinking=True, reasoning_effort="low", effort_budgets=name))[1].ids)
        for name in ("low50-high75", "low25-high50")
    }  # fmt: skip
    assert len(set(low.values())) == 1


def test_an_unknown_table_is_warned_not_guessed() -> None:
    def tokenize(prompt: Any, kwargs: dict[str, Any] | None) -> list[int]:
        text = reference_render(list(prompt.messages), v41=True, thinking=True, effort=33)
        return TOK.encode(text)

    with pytest.warns(PhaseawareWarning, match="no known effort table"):
        found = effort_table_of(
            None,  # type: ignore[arg-type]
            "m",
            "http://127.0.0.1:1/v1",
            TOK,
            0,
            IdsRoute(tokenize, render=False),
        )
    assert found is None


def test_the_records_effort_table_plans_every_request() -> None:
    record = EndpointRecord(
        base_url="http://127.0.0.1:1/v1", model="m", offset=0, offsets=(0,), mode="exact",
        stability="constant", date="2026-12-04T00:00:00+00:00", tokenizer_spec="deepseek-v4",
        tokenizer_fingerprint=TOK.fingerprint(), chat_format="deepseek-v4.1", probes=5,
        tool_version="0", thinking=True, effort_budgets="low25-high50", ids_route="render",
        server_default={"thinking": True, "reasoning_effort": "high", "matched": True},
    )  # fmt: skip
    assert EndpointRecord.from_dict(record.to_dict()) == record
    stated = record_settings(record)
    assert stated == ChatSettings(thinking=True, effort_budgets="low25-high50")
    default = record_settings(record, state_settings=False)
    text = get_chat_format("deepseek-v4.1", TOK, settings=default).render(
        parse_messages([{"role": "user", "content": "q"}])
    )
    assert "Reasoning Effort: 50 (range" in text  # SGLang's "high"
    # records written before these fields keep their JSON
    old = EndpointRecord(**{**record.__dict__, "effort_budgets": None, "ids_route": None})
    assert "effort_budgets" not in old.to_dict() and "ids_route" not in old.to_dict()


def test_render_first_then_tokenize_for_good() -> None:
    calls: list[str] = []

    def tokenize(prompt: Any, kwargs: dict[str, Any] | None) -> list[int]:
        calls.append("tokenize")
        return list(prompt.ids)

    prompt = probe_prompts(TOK, "deepseek-v4")[1]
    route = IdsRoute(tokenize)

    class NoRender:
        def post(self, url: str, **_: Any) -> Any:
            import httpx
            import openai

            calls.append("render")
            request = httpx.Request("POST", url)
            raise openai.PermissionDeniedError(
                "disabled", response=httpx.Response(403, request=request), body=None
            )

    for _ in range(2):
        ids = server_ids(NoRender(), "m", prompt, "http://h/v1", None, route, TOK)  # type: ignore[arg-type]
        assert ids == list(prompt.ids)
    assert calls == ["render", "tokenize", "tokenize"]
    assert route.name == "tokenize" and route.failed == 1
    assert route.note is not None and "--enable-scale-out" in route.note


def test_defaults_table_records_sglang_chat_mode_and_fields() -> None:
    sglang = server_default_for("SGLang", "deepseek-v4")
    assert sglang is not None and sglang.thinking is False and sglang.reasoning_effort is None
    assert "SGLANG_DEFAULT_THINKING=1" in sglang.switches
    assert sglang.prompt_ids_field == PROMPT_IDS_FIELDS["sglang"] and not sglang.ids_routes
    assert "chat_template_kwargs.thinking" in sglang.request_fields
    vllm = server_default_for("vllm", "deepseek-v4.1")
    assert vllm is not None and vllm.thinking and vllm.reasoning_effort == "high"
    assert vllm.effort_budgets == "low50-high75"
    # SGLang 0.5.23 renders V4.1 through deepseek-recipe, whose table is 50/75/100 (its
    # earlier encoding_dsv41.py wrote the pre-release low25-high50: SGLang issue 39909)
    assert server_default_for("sglang", "deepseek-v4.1").effort_budgets == "low50-high75"  # type: ignore[union-attr]
    assert server_default_for("tgi", "hf") is None
    assert all(row.source for row in SERVER_DEFAULTS.values())


@pytest.mark.parametrize("thinking", [False, True])
def test_probe_records_sglangs_table_over_http(thinking: bool, tmp_path: Any) -> None:
    """A V4.1 server with SGLang's effort table (budgets of one token each: the same
    count): exact mode finds the table first, then every probe renders with it."""
    from phaseaware.endpoints import probe_endpoint
    from tests.support.deepseek_reference import vllm_request
    from tests.support.endpoint_server import start_endpoint

    def renderer(messages: list[dict[str, Any]], kwargs: dict[str, Any] | None) -> str:
        on, effort = vllm_request(kwargs or {}, v41=True)
        return reference_render(
            messages, v41=True, thinking=on, effort=effort, table="low25-high50"
        )

    server, _app = start_endpoint(
        tokenizer=TOK, chat_format="deepseek-v4.1", tokenize_route=True, renderer=renderer
    )
    with server:
        record = probe_endpoint(
            base_url=server.base_url, model="sim-model", tokenizer=TOK,
            chat_format="deepseek-v4.1", mode="exact", thinking=thinking, directory=tmp_path,
        )  # fmt: skip
    assert record.effort_budgets == "low25-high50" and record.offset == 0
    assert record.ids_route == "tokenize" and "absent" in (record.ids_note or "")
    # the default (thinking, "high" = 50 in this table) is found with the table
    assert record.server_default is not None and record.server_default["thinking"] is True
