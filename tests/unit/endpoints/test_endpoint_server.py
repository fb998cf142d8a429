"""Endpoint records name the server software and the ``hf`` template; probes need no filler."""

from __future__ import annotations

import dataclasses
import hashlib

from phaseaware.assembly.prepare.filler import filler_unit, find_filler
from phaseaware.endpoints import EndpointRecord
from phaseaware.endpoints.server import template_sha256
from phaseaware.tokenizers import load_tokenizer
from tests.support.smollm2 import smollm2_gguf

RECORD = EndpointRecord(
    base_url="http://127.0.0.1:8000/v1", model="m", offset=0, offsets=(0,), mode="count",
    stability="constant", date="2026-12-04T00:00:00+00:00", tokenizer_spec="t",
    tokenizer_fingerprint="f", chat_format="hf", probes=19, tool_version="0",
)  # fmt: skip


def test_new_fields_round_trip_and_old_records_still_load():
    new = dataclasses.replace(
        RECORD, server="llama-cpp-python 0.3.36", chat_template_sha256=template_sha256("{{ x }}")
    )
    assert EndpointRecord.from_dict(new.to_dict()) == new
    old = RECORD.to_dict()
    del old["server"], old["chat_template_sha256"]
    assert EndpointRecord.from_dict(old) == RECORD
    assert template_sha256(None) is None and template_sha256("") is None
    assert template_sha256("{{ x }}") == hashlib.sha256(b"{{ x }}").hexdigest()


def test_probe_text_is_the_filler_unit_or_the_default():
    o200k = load_tokenizer("tiktoken:o200k_base")
    assert filler_unit(o200k, period=8, default="?") == find_filler(o200k, period=8).unit
    gguf = smollm2_gguf()
    if gguf is not None:  # GPT-2-style pre-tokenizer: no filler qualifies
        assert filler_unit(load_tokenizer(f"hf:{gguf}"), period=8, default=" .") == " ."


def test_tool_arguments_round_trip_reach_the_plan_and_bad_values_are_refused():
    import pytest

    from phaseaware.endpoints.request_settings import record_settings
    from phaseaware.errors import InputError

    text = dataclasses.replace(RECORD, tool_arguments="string")
    assert EndpointRecord.from_dict(text.to_dict()) == text
    assert "tool_arguments" not in RECORD.to_dict()  # older readers see the record unchanged
    assert record_settings(text).tool_arguments == "string"
    assert record_settings(dataclasses.replace(text, chat_format="chatml")).tool_arguments is None
    with pytest.raises(InputError, match="tool_arguments must be object or string"):
        dataclasses.replace(RECORD, tool_arguments="dict")


def test_a_template_differing_only_in_its_final_newline_is_the_same_template():
    from phaseaware.endpoints.server import _same_template

    assert _same_template("{{ x }}", "{{ x }}\n")  # Jinja drops one final newline
    assert _same_template("{{ x }}\n", "{{ x }}")
    assert not _same_template("{{ x }}", "{{ x }}\n\n")
    assert not _same_template("{{ x }}", None)
    assert not _same_template("{{ y }}", "{{ x }}")
