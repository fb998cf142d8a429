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
from collections.abc import Callable, Mapping, Sequence
from typing import Any, Literal
from uuid import UUID

from langchain_core.callbacks import BaseCallbackHandler
from langchain_core.messages import AIMessage, BaseMessage
from langchain_core.outputs import ChatGeneration, LLMResult

from langchain_phaseaware.convert import message_dicts, served_identity, tool_schemas
from phaseaware.errors import InputError
from phaseaware.integrate import (
    AssemblyRequest,
    ChatFormat,
    ChatSettings,
    EndpointRef,
    Tokenizer,
    UsageCheck,
    check_on_mismatch,
    check_usage,
    rendered_tokens,
    resolve_target,
)

__all__ = ["PhaseAwareUsageCheck", "reported_prompt_tokens", "planned_prompt_tokens"]


def planned_prompt_tokens(
    messages: Sequence[BaseMessage], *, tokenizer: Tokenizer, chat_format: ChatFormat
) -> int:
    """Tokens of ``messages`` as ``chat_format`` renders them (generation prompt included)."""
    target = resolve_target(AssemblyRequest(tokenizer=tokenizer, chat_format=chat_format))
    return rendered_tokens(target, message_dicts(messages))


def reported_prompt_tokens(response: LLMResult) -> int | None:
    """The server's prompt token count in ``response``, or ``None`` when it sent none
    (a streamed call reports it on its final chunk, merged into the message's usage)."""
    for generations in response.generations:
        for generation in generations:
            if isinstance(generation, ChatGeneration) and isinstance(generation.message, AIMessage):
                usage = generation.message.usage_metadata
                if usage is not None and "input_tokens" in usage:
                    return int(usage["input_tokens"])
    token_usage = (response.llm_output or {}).get("token_usage") or {}
    value = token_usage.get("prompt_tokens")
    return int(value) if isinstance(value, int) and not isinstance(value, bool) else None


def _identity(response: LLMResult) -> tuple[str | None, str | None]:
    """The served model and fingerprint the response reports (message metadata first)."""
    for generations in response.generations:
        for generation in generations:
            if isinstance(generation, ChatGeneration):
                found = served_identity(generation.message.response_metadata)
                if found != (None, None):
                    return found
    return served_identity(response.llm_output)


class PhaseAwareUsageCheck(BaseCallbackHandler):
    """Compare ``usage.prompt_tokens`` with the rendered prompt on every chat model call.

    ``position_offset``: tokens the endpoint is known to add before the prompt (the
    ``position_offset`` the prompt was planned with). ``endpoint``: an endpoint
    record (``EndpointRecord``, path or ``{"base_url", "model"}``) instead: its
    ``offset`` is expected, and for a varying record any of its ``offsets``; a
    record probed with another tokenizer raises ``FingerprintMismatchError``, a
    ``position_offset`` that disagrees with it ``InputError``. ``on_mismatch``: ``"warn"``
    (default), ``"raise"`` or ``"ignore"``. ``on_check``: called with each
    :class:`~phaseaware.endpoints.UsageCheck` (e.g. to log it). A response
    without usage is not checked; a streamed one is checked on its final usage
    chunk (``ChatOpenAI(stream_usage=True)``). Tools bound to the model are rendered
    into the planned count where the chat format renders them (``deepseek-v4``); other
    formats refuse them (``UnsupportedSettingError``) unless ``tool_schemas="not_rendered"``.
    ``settings`` / ``thinking`` / ``state_settings``: the chat settings the prompt was
    planned with, as for ``PhaseAwarePrompt`` (with an ``endpoint`` record and
    ``state_settings=False``, its ``server_default``). A response whose ``model`` or
    ``system_fingerprint`` differs from the record's warns (the checkpoint changed).
    Pass it as
    ``config={"callbacks": [check]}`` or ``llm.with_config(callbacks=[check])``.
    """

    raise_error = True  # let PromptTokenDriftError reach the caller when on_mismatch="raise"

    def __init__(
        self,
        *,
        tokenizer: str | Tokenizer,
        chat_format: str | ChatFormat,
        position_offset: int | None = None,
        endpoint: EndpointRef = None,
        on_mismatch: Literal["warn", "raise", "ignore"] = "warn",
        on_check: Callable[[UsageCheck], None] | None = None,
        thinking: bool = False,
        tool_schemas: Literal["rendered", "not_rendered"] = "rendered",
        settings: ChatSettings | Mapping[str, Any] | None = None,
        state_settings: bool = True,
    ) -> None:
        if tool_schemas not in ("rendered", "not_rendered"):
            raise InputError(
                f"tool_schemas must be 'rendered' or 'not_rendered', got {tool_schemas!r}"
            )
        self.tool_schemas = tool_schemas
        self.on_mismatch = check_on_mismatch(on_mismatch)
        self.target = resolve_target(
            AssemblyRequest(
                tokenizer=tokenizer,
                chat_format=chat_format,
                position_offset=position_offset,
                thinking=thinking,
                settings=settings,
            ),
            endpoint=endpoint,
            state_settings=state_settings,
        )
        self.position_offset, self.offsets = self.target.usage_offsets
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
        target = self.target
        tools = (kwargs.get("invocation_params") or {}).get("tools")
        if self.tool_schemas == "rendered":
            target = target.with_tools(
                tool_schemas(tools),
                fix="; or pass tool_schemas='not_rendered' to PhaseAwareUsageCheck if the "
                "server writes no tool schemas into the prompt",
            )
        planned = rendered_tokens(target, message_dicts(messages[0]))
        with self._lock:
            self._planned[run_id] = planned

    def on_llm_error(self, error: BaseException, *, run_id: UUID, **kwargs: Any) -> None:
        with self._lock:
            self._planned.pop(run_id, None)

    def on_llm_end(self, response: LLMResult, *, run_id: UUID, **kwargs: Any) -> None:
        with self._lock:
            planned = self._planned.pop(run_id, None)
        if planned is None:
            return
        served_model, fingerprint = _identity(response)
        check = check_usage(
            self.target,
            planned_tokens=planned,
            reported_tokens=reported_prompt_tokens(response),
            on_mismatch=self.on_mismatch,
            served_model=served_model,
            system_fingerprint=fingerprint,
        )
        if check is not None and self.on_check is not None:
            self.on_check(check)
