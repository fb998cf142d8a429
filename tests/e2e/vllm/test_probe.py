"""probe-endpoint against a real vLLM in DeepSeek-V4 mode, with the server's defaults."""

from __future__ import annotations

import warnings

from phaseaware.endpoints import probe_endpoint
from tests.support.vllm_server import VllmServer


def test_exact_mode_finds_offset_zero_the_server_default_and_identity(
    vllm_v4: VllmServer, tmp_path
) -> None:  # type: ignore[no-untyped-def]
    record = probe_endpoint(
        base_url=vllm_v4.base_url,
        model=vllm_v4.model,
        tokenizer="deepseek-v4",
        chat_format="deepseek-v4",
        mode="exact",
        directory=tmp_path,
    )
    assert record.mode == "exact" and record.offset == 0 and record.stability == "constant"
    assert record.served_model == vllm_v4.model
    assert record.system_fingerprint and record.system_fingerprint.startswith("vllm-")
    # a request naming no settings gets thinking with reasoning effort "high" (a preamble)
    assert record.server_default == {"thinking": True, "reasoning_effort": "high", "matched": True}


def test_count_mode_checks_thinking_or_says_it_cannot_tell(vllm_v4: VllmServer, tmp_path) -> None:  # type: ignore[no-untyped-def]
    """Either the thinking on/off pair counts as phaseaware renders it ("verified"), or the
    record (and a warning) says a count cannot tell; never a silent offset."""
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        record = probe_endpoint(
            base_url=vllm_v4.base_url,
            model=vllm_v4.model,
            tokenizer="deepseek-v4",
            chat_format="deepseek-v4",
            mode="count",
            directory=tmp_path,
        )
    assert record.mode == "count" and record.offset == 0
    assert record.settings_check is not None
    if record.settings_check != "verified":
        assert any("cannot tell" in str(w.message) for w in caught)
