"""probe-endpoint against a real vLLM: DeepSeek-V4 mode with the server's defaults and
without the render endpoint (ids from /tokenize), V4.1 and the reference model's Jinja
template with ``--enable-scale-out`` (ids from ``/v1/chat/completions/render``); the
V4.1 effort table; prompt token ids returned with a reply compared to the plan."""

from __future__ import annotations

import warnings

from phaseaware.chat import ChatSettings, get_chat_format, parse_messages
from phaseaware.endpoints import PROMPT_IDS_FIELDS, check_response, probe_endpoint
from phaseaware.tokenizers import load_tokenizer
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
    # this server runs without --enable-scale-out: render answers 403, ids from /tokenize
    assert record.ids_route == "tokenize" and record.effort_budgets is None
    assert record.ids_note is not None and "--enable-scale-out" in record.ids_note


def test_render_route_and_the_v41_effort_table(vllm_v41: VllmServer, tmp_path) -> None:  # type: ignore[no-untyped-def]
    record = probe_endpoint(
        base_url=vllm_v41.base_url,
        model=vllm_v41.model,
        tokenizer="deepseek-v4",
        chat_format="deepseek-v4.1",
        mode="exact",
        directory=tmp_path,
    )
    assert record.mode == "exact" and record.offset == 0
    assert record.ids_route == "render"
    # vLLM's DeepSeek renderer computes no token offsets (BaseRenderer._can_produce_offsets)
    assert record.ids_note is not None and "none returned" in record.ids_note
    # vLLM 0.32 ships V4.1's low50-high75 table (deepseek_v41_encoding.py)
    assert record.effort_budgets == "low50-high75"
    # thinking with V4.1's default effort: unset renders "high" (the encoder's default too)
    default = dict(record.server_default or {})
    assert default.pop("reasoning_effort") in (None, "high")
    assert default == {"thinking": True, "matched": True}


def test_render_route_offsets_agree_on_a_jinja_template(
    vllm_reference: VllmServer, tmp_path
) -> None:  # type: ignore[no-untyped-def]
    record = probe_endpoint(
        base_url=vllm_reference.base_url,
        model=vllm_reference.model,
        tokenizer="reference",
        chat_format="hf",
        mode="exact",
        directory=tmp_path,
    )
    assert record.mode == "exact" and record.ids_route == "render"
    assert record.ids_note is not None and record.ids_note.startswith(
        "token offsets agree with phaseaware's tokens"
    ), record.ids_note


def test_returned_prompt_ids_catch_what_a_count_cannot(vllm_v4: VllmServer) -> None:
    """vLLM returns the prompt's ids for ``return_token_ids``; compared to the plan they
    catch a thinking mismatch (``<think>`` for ``</think>``: the same count)."""
    import openai

    tok = load_tokenizer("deepseek-v4")
    messages = [{"role": "user", "content": "Name a river."}]
    sent = ChatSettings(thinking=True, reasoning_effort="low")
    client = openai.OpenAI(base_url=vllm_v4.base_url, api_key="EMPTY", max_retries=0)
    response = client.chat.completions.create(
        model=vllm_v4.model,
        messages=messages,  # type: ignore[arg-type]
        max_tokens=1,
        temperature=0,
        extra_body={
            "chat_template_kwargs": sent.chat_template_kwargs("deepseek-v4"),
            PROMPT_IDS_FIELDS["vllm"]: True,
        },
    )

    def planned(settings: ChatSettings) -> list[int]:
        fmt = get_chat_format("deepseek-v4", tok, settings=settings)
        return tok.encode(fmt.render(parse_messages(messages)))

    ok = check_response(response, planned_tokens=0, planned_ids=planned(sent))
    assert ok is not None and ok.ids_compared and ok.ok
    wrong_plan = planned(ChatSettings(thinking=False))
    assert len(wrong_plan) == len(planned(sent))  # a count cannot tell them apart
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        bad = check_response(response, planned_tokens=0, planned_ids=wrong_plan)
    assert bad is not None and not bad.ok and bad.first_difference == len(wrong_plan) - 1


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
