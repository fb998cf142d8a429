"""What the vLLM tier's agent tests share: the notes a tool returns, the DeepSeek-V4
settings that keep the reasoning, the target planned with them, and the prompt ids vLLM
reports for a conversation sent with the official client."""

from __future__ import annotations

from typing import Any

from phaseaware import AssemblyRequest
from phaseaware.chat import ChatSettings
from phaseaware.endpoints.usage import PROMPT_IDS_FIELDS, reported_prompt_ids
from phaseaware.integrate import Target, resolve_target
from phaseaware.tokenizers.base import Tokenizer
from tests.support.vllm_server import VllmServer

TEXTS = [
    "The pump P-7 trips when inlet pressure falls below 1.8 bar.",
    "Module voltage below 3.1 V disables the module until service.",
    "The cafeteria opens at 7:30 on weekdays.",
]
KEEP = ChatSettings(thinking=True, reasoning_effort="max", drop_thinking=False)


def keep_target(tok: Tokenizer) -> Target:
    """DeepSeek-V4 with ``KEEP``, the published profile, a 4,000-token budget."""
    return resolve_target(
        AssemblyRequest(tokenizer=tok, chat_format="deepseek-v4", settings=KEEP,
                        profile="deepseek-v4-flash-base", budget_tokens=4000)
    )  # fmt: skip


def server_ids(server: VllmServer, messages: list[dict[str, Any]]) -> tuple[int, ...]:
    """The prompt ids vLLM reports for ``messages`` sent with ``KEEP``."""
    import openai

    client = openai.OpenAI(base_url=server.base_url, api_key="EMPTY", max_retries=0)
    response = client.chat.completions.create(
        model=server.model, messages=messages, max_tokens=1, temperature=0,  # type: ignore[arg-type]
        extra_body={"chat_template_kwargs": KEEP.chat_template_kwargs("deepseek-v4"),
                    PROMPT_IDS_FIELDS["vllm"]: True},
    )  # fmt: skip
    ids = reported_prompt_ids(response)
    assert ids is not None
    return ids
