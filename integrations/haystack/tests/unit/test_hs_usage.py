"""PhaseAwareUsageCheck: the generator's meta["usage"] against the messages sent."""

from __future__ import annotations

import asyncio
import warnings

import pytest
from haystack.dataclasses import ChatMessage
from haystack_integrations.components.validators.phaseaware import PhaseAwareUsageCheck
from haystack_integrations.utils.phaseaware import message_dicts

import phaseaware.integrate as kit
from phaseaware.errors import PhaseawareWarning, PromptTokenDriftError

MESSAGES = [ChatMessage.from_system("Be brief."), ChatMessage.from_user("Code of Priya?")]


def _reply(prompt_tokens: int | None) -> ChatMessage:
    meta = {"model": "m", "finish_reason": "stop"}
    if prompt_tokens is not None:
        meta["usage"] = {"prompt_tokens": prompt_tokens, "completion_tokens": 2}
    return ChatMessage.from_assistant("317", meta=meta)


def _planned() -> int:
    target = kit.resolve_target(
        kit.AssemblyRequest(tokenizer="tiktoken:o200k_base", chat_format="chatml")
    )
    return kit.rendered_tokens(target, message_dicts(MESSAGES))


def test_equal_counts_pass_and_the_replies_go_through() -> None:
    check = PhaseAwareUsageCheck(tokenizer="tiktoken:o200k_base", chat_format="chatml",
                                 position_offset=1, on_mismatch="raise")  # fmt: skip
    replies = [_reply(_planned() + 1)]
    out = check.run(replies=replies, messages=MESSAGES)
    assert out["replies"] is replies
    assert out["usage_check"] == {"planned_tokens": _planned(), "offset": 1,
                                  "reported_tokens": _planned() + 1, "drift": 0, "ok": True}  # fmt: skip
    assert asyncio.run(check.run_async(replies=replies, messages=MESSAGES)) == out


def test_a_drift_warns_or_raises_as_configured() -> None:
    warn = PhaseAwareUsageCheck(tokenizer="tiktoken:o200k_base", chat_format="chatml")
    with pytest.warns(PhaseawareWarning, match="position_offset"):
        out = warn.run(replies=[_reply(_planned() + 3)], messages=MESSAGES)
    assert out["usage_check"]["drift"] == 3 and not out["usage_check"]["ok"]
    strict = PhaseAwareUsageCheck.from_dict(
        PhaseAwareUsageCheck(tokenizer="tiktoken:o200k_base", chat_format="chatml",
                             on_mismatch="raise").to_dict()
    )  # fmt: skip
    with pytest.raises(PromptTokenDriftError):
        strict.run(replies=[_reply(_planned() + 3)], messages=MESSAGES)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        assert strict.run(replies=[_reply(None)], messages=MESSAGES)["usage_check"] is None
    with pytest.raises(ValueError, match="on_mismatch"):
        PhaseAwareUsageCheck(tokenizer="tiktoken:o200k_base", chat_format="chatml",
                             on_mismatch="shout")  # type: ignore[arg-type]  # fmt: skip
