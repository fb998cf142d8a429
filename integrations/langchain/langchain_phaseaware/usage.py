"""Checked at the model: the server's prompt token count against the rendered prompt's.

:class:`PhaseAwareUsageCheck` is a LangChain callback handler. When a chat model
starts, it renders the messages it was given with the model's chat format and
tokenizes them (the planned count: for a ``PhaseAwarePrompt`` output that is
exactly ``report["token_count"]``). When the response arrives, it reads the
server's count (``AIMessage.usage_metadata["input_tokens"]``, else
``llm_output["token_usage"]["prompt_tokens"]``) and calls
:func:`phaseaware.endpoints.check_prompt_tokens`: a mismatch warns
(``PhaseawareWarning``) or raises (``PromptTokenDriftError``) with the drift and
its likely cause (another chat format on the server, or hidden server-side text).

Per-run state only: the planned count is kept under the run's id between start
and end, and dropped at the end; nothing carries over between calls.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Sequence
from typing import Any, Literal
from uuid import UUID

from langchain_core.callbacks import BaseCallbackHandler
from langchain_core.messages import AIMessage, BaseMessage
from langchain_core.outputs import ChatGeneration, LLMResult

from langchain_phaseaware.convert import message_dicts, resolve_chat_format, resolve_tokenizer
from phaseaware.assembly.options import AssemblyOptions, check_position_offset
from phaseaware.chat.formats import ChatFormat
from phaseaware.chat.messages import parse_messages
from phaseaware.endpoints import (
    ON_MISMATCH,
    EndpointRef,
    UsageCheck,
    check_prompt_tokens,
    endpoint_options,
    load_endpoint,
    usage_offsets,
)
from phaseaware.errors import InputError
from phaseaware.tokenizers.base import Tokenizer

__all__ = ["PhaseAwareUsageCheck", "reported_prompt_tokens", "planned_prompt_tokens"]


def planned_prompt_tokens(
    messages: Sequence[BaseMessage], *, tokenizer: Tokenizer, chat_format: ChatFormat
) -> int:
    """Tokens of ``messages`` as ``chat_format`` renders them (generation prompt included)."""
    text = chat_format.render(parse_messages(message_dicts(messages)), add_generation_prompt=True)
    return len(tokenizer.encode(text))


def reported_prompt_tokens(response: LLMResult) -> int | None:
    """The server's prompt token count in ``response``, or ``None`` when it sent none."""
    for generations in response.generations:
        for generation in generations:
            if isinstance(generation, ChatGeneration) and isinstance(generation.message, AIMessage):
                usage = generation.message.usage_metadata
                if usage is not None and "input_tokens" in usage:
                    return int(usage["input_tokens"])
    token_usage = (response.llm_output or {}).get("token_usage") or {}
    value = token_usage.get("prompt_tokens")
    return int(value) if isinstance(value, int) and not isinstance(value, bool) else None


class PhaseAwareUsageCheck(BaseCallbackHandler):
    """Compare ``usage.prompt_tokens`` with the rendered prompt on every chat model call.

    ``offset``: tokens the endpoint is known to add before the prompt (the
    ``position_offset`` the prompt was planned with). ``endpoint``: an endpoint
    record (``EndpointRecord``, path or ``{"base_url", "model"}``) instead: its
    ``offset`` is expected, and for a varying record any of its ``offsets``; a
    record probed with another tokenizer raises ``FingerprintMismatchError``, an
    ``offset`` that disagrees with it ``InputError``. ``on_mismatch``: ``"warn"``
    (default), ``"raise"`` or ``"ignore"``. ``on_check``: called with each
    :class:`~phaseaware.endpoints.UsageCheck` (e.g. to log it). A response
    without usage is not checked. Pass it as ``config={"callbacks": [check]}``
    or ``llm.with_config(callbacks=[check])``.
    """

    raise_error = True  # let PromptTokenDriftError reach the caller when on_mismatch="raise"

    def __init__(
        self,
        *,
        tokenizer: str | Tokenizer,
        chat_format: str | ChatFormat,
        offset: int | None = None,
        endpoint: EndpointRef = None,
        on_mismatch: Literal["warn", "raise", "ignore"] = "warn",
        on_check: Callable[[UsageCheck], None] | None = None,
        thinking: bool = False,
    ) -> None:
        if on_mismatch not in ON_MISMATCH:
            raise InputError(
                f"on_mismatch must be one of {', '.join(ON_MISMATCH)}, got {on_mismatch!r}"
            )
        self.tokenizer = resolve_tokenizer(tokenizer)
        self.chat_format = resolve_chat_format(chat_format, self.tokenizer, thinking=thinking)
        self.endpoint = load_endpoint(endpoint)
        options = AssemblyOptions(
            position_offset=0 if offset is None else check_position_offset(offset, name="offset")
        )
        options = endpoint_options(options, self.endpoint, self.tokenizer)
        self.offset, self.offsets = usage_offsets(options)
        self.on_mismatch: Literal["warn", "raise", "ignore"] = on_mismatch
        self.on_check = on_check
        self._planned: dict[UUID, int] = {}
        self._lock = threading.Lock()

    def on_chat_model_start(
        self,
        serialized: dict[str, Any],
        messages: list[list[BaseMessage]],
        *,
        run_id: UUID,
        **kwargs: Any,
    ) -> None:
        if len(messages) != 1:
            return  # one prompt per run is what a chat model call sends
        planned = planned_prompt_tokens(
            messages[0], tokenizer=self.tokenizer, chat_format=self.chat_format
        )
        with self._lock:
            self._planned[run_id] = planned

    def on_llm_error(self, error: BaseException, *, run_id: UUID, **kwargs: Any) -> None:
        with self._lock:
            self._planned.pop(run_id, None)

    def on_llm_end(self, response: LLMResult, *, run_id: UUID, **kwargs: Any) -> None:
        with self._lock:
            planned = self._planned.pop(run_id, None)
        reported = reported_prompt_tokens(response)
        if planned is None or reported is None:
            return
        check = check_prompt_tokens(
            planned_tokens=planned,
            reported_tokens=reported,
            offset=self.offset,
            offsets=self.offsets,
            on_mismatch=self.on_mismatch,
            offset_name="offset",
        )
        if self.on_check is not None:
            self.on_check(check)
