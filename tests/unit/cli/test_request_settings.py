"""The request file's chat settings: effort, and the endpoint record's server default.

``options.reasoning_effort`` and ``options.server_default`` reach ``assemble``
as full ``ChatSettings``; the prompt is the one the server renders for them (the effort
preamble included). Thinking alone keeps today's path, byte for byte.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from phaseaware.assembly import assemble
from phaseaware.chat import ChatSettings, get_chat_format, parse_messages
from phaseaware.cli.request import parse_request
from phaseaware.endpoints import EndpointRecord
from phaseaware.endpoints.record import save_endpoint_record
from phaseaware.errors import InputError
from phaseaware.tokenizers import load_tokenizer

ROOT = Path(__file__).resolve().parents[3]
HIGH = {"thinking": True, "reasoning_effort": "high", "matched": True}


def _request(**options: Any) -> dict[str, Any]:
    doc = json.loads((ROOT / "examples" / "request.json").read_text(encoding="utf-8"))
    doc["options"] = {"strategy": "reorder", **options}
    doc["chunks"] = doc["chunks"][:3]
    return doc


def _record_path(tmp_path: Path, **extra: Any) -> str:
    tok = load_tokenizer("deepseek-v4")
    record = EndpointRecord(
        base_url="http://127.0.0.1:1/v1", model="m", offset=0, offsets=(0,), mode="exact",
        stability="constant", date="2026-12-04T00:00:00+00:00", tokenizer_spec="deepseek-v4",
        tokenizer_fingerprint=tok.fingerprint(), chat_format="deepseek-v4", probes=4,
        tool_version="0", **extra,
    )  # fmt: skip
    return str(save_endpoint_record(record, directory=tmp_path))


def _preamble(settings: ChatSettings) -> str:
    """The text the format writes before the system prompt with ``settings``."""
    fmt = get_chat_format("deepseek-v4", load_tokenizer("deepseek-v4"), settings=settings)
    text = fmt.render(
        parse_messages([{"role": "system", "content": "\x00"}]), add_generation_prompt=False
    )
    return text.split("\x00")[0]


def test_server_default_plans_with_the_records_default(tmp_path: Path) -> None:
    doc = {**_request(server_default=True), "endpoint": _record_path(tmp_path, server_default=HIGH)}
    kwargs = parse_request(doc, source="req.json")
    assert kwargs["settings"] == ChatSettings(thinking=True, reasoning_effort="high")
    result = assemble(**kwargs)
    preamble = _preamble(kwargs["settings"])
    assert "Reasoning Effort" in preamble and result.prompt.startswith(preamble)
    assert result.prompt.endswith("<think>")


def test_reasoning_effort_option(tmp_path: Path) -> None:
    kwargs = parse_request(_request(thinking=True, reasoning_effort="max"), source="r")
    assert kwargs["settings"] == ChatSettings(thinking=True, reasoning_effort="max")
    result = assemble(**kwargs)
    assert result.prompt.startswith(_preamble(kwargs["settings"]))
    # thinking from the endpoint record, effort from the request
    doc = {**_request(reasoning_effort="max"), "endpoint": _record_path(tmp_path, thinking=True)}
    assert parse_request(doc, source="r")["settings"].reasoning_effort == "max"


@pytest.mark.parametrize(
    ("options", "preamble", "end"),
    [
        # vLLM's DeepSeek-V4 names: medium -> low (no preamble), xhigh -> high
        ({"thinking": True, "reasoning_effort": "medium"}, False, "<think>"),
        ({"thinking": True, "reasoning_effort": "xhigh"}, True, "<think>"),
        # an effort with thinking off, and "none", render chat mode as the server does
        ({"reasoning_effort": "high"}, False, "</think>"),
        ({"thinking": True, "reasoning_effort": "none"}, False, "</think>"),
    ],
)
def test_every_effort_the_server_takes_is_planned(
    options: dict[str, Any], preamble: bool, end: str
) -> None:
    kwargs = parse_request(_request(**options), source="r")
    result = assemble(**kwargs)
    assert ("Reasoning Effort" in result.prompt) is preamble
    assert result.prompt.endswith(end)


def test_thinking_alone_keeps_the_old_path() -> None:
    kwargs = parse_request(_request(thinking=True), source="r")
    assert "settings" not in kwargs and kwargs["thinking"] is True
    old = assemble(**kwargs)
    new = assemble(**{**kwargs, "settings": ChatSettings(thinking=True)})
    assert new.prompt == old.prompt and new.to_dict() == old.to_dict()


@pytest.mark.parametrize(
    ("options", "endpoint", "message"),
    [
        ({"server_default": True}, None, "needs an 'endpoint' record"),
        ({"server_default": True, "thinking": False}, {"server_default": HIGH}, "drop options"),
        ({"server_default": True}, {}, "holds no server default"),
        ({"thinking": True, "reasoning_effort": 1.5}, None, "reasoning_effort"),
    ],
)
def test_bad_settings_are_refused_with_the_fix(
    tmp_path: Path, options: dict[str, Any], endpoint: dict[str, Any] | None, message: str
) -> None:
    doc = _request(**options)
    if endpoint is not None:
        doc["endpoint"] = _record_path(tmp_path, **endpoint)
    with pytest.raises(InputError, match=message) as info:
        parse_request(doc, source="req.json")
    assert str(info.value).startswith("req.json: ")
