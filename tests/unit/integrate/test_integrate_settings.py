"""The chat settings an adapter plans with and states (``phaseaware.integrate``).

Explicit settings win; else an endpoint record's ``thinking`` when the requests state
them, its ``server_default`` when they do not. ``request_kwargs`` states exactly what
the plan rendered, nothing for formats without options.
"""

from __future__ import annotations

import warnings
from functools import cache
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from phaseaware.chat import ChatSettings, UnsupportedSettingError, get_chat_format
from phaseaware.chat.messages import parse_messages
from phaseaware.endpoints import EndpointRecord
from phaseaware.errors import InputError, PhaseawareWarning
from phaseaware.integrate import (
    AssemblyRequest,
    check_usage,
    record_settings,
    rendered_tokens,
    reported_identity,
    resolve_settings,
    resolve_target,
)
from phaseaware.tokenizers import load_tokenizer
from phaseaware.tokenizers.base import Tokenizer

MESSAGES = [{"role": "system", "content": "Be brief."}, {"role": "user", "content": "Hi."}]
HIGH = {"thinking": True, "reasoning_effort": "high", "matched": True}


def _resolve(**kwargs: Any) -> Any:
    """``resolve_target`` of the request these keywords state (kit keywords apart)."""
    kit = {
        k: kwargs.pop(k) for k in ("endpoint", "state_settings", "default_options") if k in kwargs
    }
    return resolve_target(AssemblyRequest(**kwargs), **kit)


@cache
def _tok() -> Tokenizer:
    return load_tokenizer("deepseek-v4")


def _record(**extra: Any) -> EndpointRecord:
    return EndpointRecord(
        base_url="http://127.0.0.1:1/v1", model="m", offset=0, offsets=(0,), mode="exact",
        stability="constant", date="2026-12-04T00:00:00+00:00", tokenizer_spec="deepseek-v4",
        tokenizer_fingerprint=_tok().fingerprint(), chat_format="deepseek-v4", probes=4,
        tool_version="0", **extra,
    )  # fmt: skip


def _target(**kwargs: Any) -> Any:
    return _resolve(tokenizer=_tok(), chat_format="deepseek-v4", **kwargs)


def test_no_settings_is_thinking_off_and_stated() -> None:
    target = _target()
    assert target.settings == ChatSettings()
    assert target.request_kwargs() == {
        "extra_body": {"chat_template_kwargs": ChatSettings().chat_template_kwargs("deepseek-v4")}
    }


def test_explicit_settings_win_over_the_record() -> None:
    record = _record(thinking=False, server_default=HIGH)
    chosen = ChatSettings(thinking=True, reasoning_effort="max")
    for state in (True, False):
        target = _target(endpoint=record, settings=chosen, state_settings=state)
        assert target.settings == chosen
    assert _target(settings={"thinking": True}).settings == ChatSettings(thinking=True)
    assert _target(thinking=True, endpoint=record).settings == ChatSettings(thinking=True)


def test_a_record_whose_requests_state_settings_gives_its_thinking() -> None:
    target = _target(endpoint=_record(thinking=True, server_default=HIGH))
    assert target.settings == ChatSettings(thinking=True)
    kwargs = target.request_kwargs()["extra_body"]["chat_template_kwargs"]
    assert kwargs["thinking"] is True and kwargs["reasoning_effort"] == "low"


def test_a_record_whose_requests_state_nothing_gives_the_server_default() -> None:
    target = _target(endpoint=_record(server_default=HIGH), state_settings=False)
    assert target.settings == ChatSettings(thinking=True, reasoning_effort="high")
    assert target.request_kwargs() == {} and target.chat_template_kwargs() is None
    # the plan renders the server's default: the effort preamble is in the prompt
    high = get_chat_format("deepseek-v4", _tok(), settings=target.settings)
    text = high.render(parse_messages(MESSAGES), add_generation_prompt=True)
    assert "Reasoning Effort" in text
    assert rendered_tokens(target, MESSAGES) == len(_tok().encode(text))
    assert rendered_tokens(target, MESSAGES) > rendered_tokens(_target(), MESSAGES) + 50


@pytest.mark.parametrize(
    "default",
    [None, {"thinking": None, "matched": False, "extra_tokens": 79}],
)
def test_no_usable_server_default_is_refused_with_the_fix(default: Any) -> None:
    with pytest.raises(InputError, match="state_settings=True"):
        _target(endpoint=_record(server_default=default), state_settings=False)


def test_formats_without_options_state_nothing() -> None:
    for name in ("none", "chatml"):
        target = _resolve(tokenizer=_tok(), chat_format=name)
        assert target.request_kwargs() == {}
        assert target.merged_kwargs({"temperature": 0}) == {"temperature": 0}


def test_a_caller_built_format_states_its_own_settings() -> None:
    fmt = get_chat_format("deepseek-v4", _tok(), settings=ChatSettings(thinking=True))
    target = _resolve(tokenizer=_tok(), chat_format=fmt)
    assert target.settings == ChatSettings(thinking=True)
    assert target.chat_template_kwargs() == ChatSettings(thinking=True).chat_template_kwargs(
        "deepseek-v4"
    )


def test_bad_settings_are_typed_errors() -> None:
    with pytest.raises(InputError, match="settings must be"):
        _target(settings=3)
    with pytest.raises(InputError, match="unknown chat settings"):
        _target(settings={"thinkng": True})
    with pytest.raises(InputError, match="state_settings"):
        _target(state_settings="no")
    with pytest.raises(InputError, match="disagrees"):
        _target(settings=ChatSettings(), thinking=True)


def test_merged_kwargs_keeps_the_callers_and_refuses_a_clash() -> None:
    target = _target(thinking=True)
    existing = {"temperature": 0, "extra_body": {"top_k": 3, "chat_template_kwargs": {"x": 1}}}
    merged = target.merged_kwargs(existing)
    assert existing == {
        "temperature": 0,
        "extra_body": {"top_k": 3, "chat_template_kwargs": {"x": 1}},
    }
    assert merged["temperature"] == 0 and merged["extra_body"]["top_k"] == 3
    stated = merged["extra_body"]["chat_template_kwargs"]
    assert stated == {"x": 1, **ChatSettings(thinking=True).chat_template_kwargs("deepseek-v4")}
    with pytest.raises(UnsupportedSettingError, match="differs in enable_thinking, thinking"):
        target.merged_kwargs(
            {"extra_body": {"chat_template_kwargs": {"thinking": False, "enable_thinking": False}}}
        )


effort_st = st.sampled_from([None, "low", "high", "xhigh", "max"])


@given(thinking=st.booleans(), effort=effort_st, state=st.booleans())
def test_resolution_rule(thinking: bool, effort: str | None, state: bool) -> None:
    default = {"thinking": thinking, "reasoning_effort": effort if thinking else None}
    record = _record(thinking=not thinking, server_default={**default, "matched": True})
    got = resolve_settings(endpoint=record, state_settings=state)
    if state:
        assert got == ChatSettings(thinking=not thinking)
    else:
        assert got == ChatSettings(**default)
    assert record_settings(record, state_settings=state) == got
    assert resolve_settings() == ChatSettings()


def test_usage_check_warns_when_the_served_checkpoint_changed() -> None:
    target = _target(endpoint=_record(served_model="tiny", system_fingerprint="fp-1"))
    with pytest.warns(PhaseawareWarning, match="served checkpoint changed"):
        check_usage(
            target, planned_tokens=5, reported_tokens=5, on_mismatch="raise",
            served_model="other", system_fingerprint="fp-1",
        )  # fmt: skip
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        check = check_usage(
            target, planned_tokens=5, reported_tokens=5, on_mismatch="raise",
            served_model="tiny", system_fingerprint=None,
        )  # fmt: skip
        assert check is not None and check.ok
        check_usage(
            target, planned_tokens=5, reported_tokens=5, on_mismatch="ignore", served_model="x"
        )


def test_reported_identity_reads_objects_and_mappings() -> None:
    class Raw:
        model = "tiny"
        system_fingerprint = ""

    assert reported_identity(Raw()) == ("tiny", None)
    assert reported_identity({"model": "m", "system_fingerprint": "fp"}) == ("m", "fp")
    assert reported_identity(None) == (None, None)
