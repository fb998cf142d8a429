"""Chat settings stated in requests, server-default discovery, count-mode thinking check,
the served-checkpoint identity check, and records with the new fields."""

from __future__ import annotations

import warnings

import pytest
from hypothesis import given
from hypothesis import strategies as st

from phaseaware.calibration.backends.base import ProbeRequest
from phaseaware.calibration.backends.batch import batch_request_line
from phaseaware.endpoints import EndpointRecord, check_identity, check_response
from phaseaware.endpoints.defaults import discover_default, thinking_distinguished
from phaseaware.endpoints.record import load_endpoint_record, save_endpoint_record
from phaseaware.endpoints.request_settings import chat_template_kwargs
from phaseaware.errors import PhaseawareWarning


def test_settings_are_stated_for_formats_with_options_only() -> None:
    off = chat_template_kwargs(chat_format="deepseek-v4")
    assert off is not None and off["thinking"] is False and off["enable_thinking"] is False
    on = chat_template_kwargs(chat_format="deepseek-v4.1", thinking=True, reasoning_effort="max")
    assert on is not None and on["thinking"] is True and on["reasoning_effort"] == "max"
    assert chat_template_kwargs(chat_format="hf", thinking=True) == {
        "thinking": True,
        "enable_thinking": True,
    }
    assert chat_template_kwargs(chat_format="chatml") is None
    assert chat_template_kwargs(chat_format="none") is None


def test_batch_lines_carry_the_settings() -> None:
    request = ProbeRequest("p1", "x", 1, "7", messages=({"role": "user", "content": "x"},))
    kwargs = chat_template_kwargs(chat_format="deepseek-v4")
    line = batch_request_line(request, model="m", endpoint="chat", chat_template_kwargs=kwargs)
    assert line["body"]["chat_template_kwargs"] == kwargs
    plain = batch_request_line(request, model="m", endpoint="chat")
    assert "chat_template_kwargs" not in plain["body"]


def test_discover_default_names_the_matching_setting() -> None:
    on_high = {"thinking": True, "reasoning_effort": "high"}
    renders = [({"thinking": False}, [5, 6, 7]), (on_high, [5, 9, 9, 8, 7])]
    assert discover_default([1, 5, 9, 9, 8, 7], renders, offset=1) == {**on_high, "matched": True}
    assert discover_default([5, 6, 7], renders, offset=0)["thinking"] is False
    found = discover_default([5, 4, 4, 4, 8, 7], renders, offset=0)
    assert found["matched"] is False and found["extra_tokens"] == 3


@given(st.integers(0, 50), st.integers(0, 5), st.integers(-3, 3))
def test_thinking_check(base: int, extra_on: int, server_delta: int) -> None:
    """Trusted only when the server's count difference is phaseaware's; same lengths: cannot tell."""
    lengths = {False: base, True: base + extra_on}
    counts = {False: base, True: base + extra_on + server_delta}
    ok, why = thinking_distinguished(
        count=counts.__getitem__, local_lengths=lengths, texts_differ=True, thinking=False
    )
    assert ok == (server_delta == 0)
    if ok:
        assert (why is None) == (extra_on != 0)


def test_thinking_check_allows_a_varying_offset() -> None:
    ok, _ = thinking_distinguished(
        count={False: 10, True: 12}.__getitem__,
        local_lengths={False: 10, True: 10},
        texts_differ=True,
        thinking=False,
        offsets=(1, 3),
    )
    assert ok


def _record(**extra: object) -> EndpointRecord:
    return EndpointRecord(
        base_url="http://127.0.0.1:1/v1", model="m", offset=0, offsets=(0,), mode="exact",
        stability="constant", date="2026-12-04T00:00:00+00:00", tokenizer_spec="deepseek-v4",
        tokenizer_fingerprint="f", chat_format="deepseek-v4", probes=4, tool_version="0",
        **extra,  # type: ignore[arg-type]
    )  # fmt: skip


def test_record_round_trip_with_settings_and_identity(tmp_path) -> None:  # type: ignore[no-untyped-def]
    record = _record(
        thinking=True,
        server_default={"thinking": True, "matched": True},
        served_model="tiny",
        system_fingerprint="vllm-0.32.0-x",
        settings_check="verified",
    )
    assert load_endpoint_record(save_endpoint_record(record, directory=tmp_path)) == record


def test_old_records_load_without_the_new_fields(tmp_path) -> None:  # type: ignore[no-untyped-def]
    doc = _record().to_dict()
    for key in ("thinking", "server_default", "served_model", "system_fingerprint"):
        doc.pop(key)
    assert EndpointRecord.from_dict(doc) == _record()


def test_identity_change_warns() -> None:
    response = {"model": "v4.1-flash", "system_fingerprint": "b", "usage": {"prompt_tokens": 3}}
    with pytest.warns(PhaseawareWarning, match="served checkpoint changed"):
        assert not check_identity(response, model="v4-flash", system_fingerprint="b")
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        assert check_identity(response, model="v4.1-flash", system_fingerprint=None)
        check = check_response(
            response, planned_tokens=3, model="v4.1-flash", system_fingerprint="b"
        )
        assert check is not None and check.ok
