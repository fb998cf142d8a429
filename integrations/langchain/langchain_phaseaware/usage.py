"""``PhaseAwareUsageCheck``: the server's prompt against the rendered one, count or id for id.

Id for id where the reply carries the prompt's ids: the chat model was built with
:func:`~langchain_phaseaware.served.prompt_ids_clients` and asks for them (``llm.bind(
**place.model_kwargs(llm))``, with an endpoint record naming vLLM or SGLang), streamed or
not. The callback never sees the body: ``ChatOpenAI`` keeps only its ``id`` (and of a
stream not even that). It takes what the model's hook kept
(:func:`~langchain_phaseaware.served.take_reply`): by that ``id`` from a bounded store, or
the one reply of its call's context that arrived after the call started (a stream; a call
the ``PhaseAwareMiddleware`` captures). Why no other call's body can come back:
:mod:`langchain_phaseaware.served`, :mod:`phaseaware.integrate.replies`. Without one the
count is checked (``usage.prompt_tokens``), and the check says why
(``UsageCheck.count_only_reason``)."""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import Any, Literal
from uuid import UUID

from langchain_core.callbacks import BaseCallbackHandler
from langchain_core.messages import AIMessage, BaseMessage
from langchain_core.outputs import ChatGeneration, LLMResult

import phaseaware.integrate as kit
from langchain_phaseaware.convert import message_dicts, served_identity, tool_schemas
from langchain_phaseaware.served import reply_mark, take_reply

__all__ = ["PhaseAwareUsageCheck", "reported_prompt_tokens", "planned_prompt_tokens"]


def planned_prompt_tokens(
    messages: Sequence[BaseMessage], *, tokenizer: kit.Tokenizer, chat_format: kit.ChatFormat
) -> int:
    """Tokens of ``messages`` as ``chat_format`` renders them (generation prompt included)."""
    target = kit.resolve_target(kit.AssemblyRequest(tokenizer=tokenizer, chat_format=chat_format))
    return kit.rendered_tokens(target, message_dicts(messages))


def _messages(response: LLMResult) -> list[BaseMessage]:
    return [g.message for gs in response.generations for g in gs if isinstance(g, ChatGeneration)]


def reported_prompt_tokens(response: LLMResult) -> int | None:
    """The server's prompt token count in ``response``: an ``AIMessage``'s
    ``usage_metadata["input_tokens"]`` (a stream's final chunk, merged), else
    ``llm_output["token_usage"]["prompt_tokens"]``; ``None``: it sent none."""
    for message in _messages(response):
        usage = message.usage_metadata if isinstance(message, AIMessage) else None
        if usage is not None and "input_tokens" in usage:
            return int(usage["input_tokens"])
    return kit.reported_prompt_tokens({"usage": (response.llm_output or {}).get("token_usage")})


class PhaseAwareUsageCheck(BaseCallbackHandler):
    """A callback comparing each chat model call's reported prompt tokens with its messages
    (and bound tools) as rendered, through the kit's ``UsagePlans``; id for id where the
    model's hook kept the reply's prompt ids (the module docstring). The arguments as
    ``PhaseAwarePrompt``'s target arguments, plus ``on_mismatch`` (``"warn"``, ``"raise"``:
    ``PromptTokenDriftError``, ``"ignore"``), ``on_check`` and ``tool_schemas``: the README.
    """

    raise_error = True  # let PromptTokenDriftError reach the caller when on_mismatch="raise"

    def __init__(
        self,
        *,
        tokenizer: str | kit.Tokenizer,
        chat_format: str | kit.ChatFormat,
        position_offset: int | None = None,
        endpoint: kit.EndpointRef = None,
        on_mismatch: Literal["warn", "raise", "ignore"] = "warn",
        on_check: Callable[[kit.UsageCheck], None] | None = None,
        thinking: bool = False,
        tool_schemas: Literal["rendered", "not_rendered"] = "rendered",
        settings: kit.ChatSettings | Mapping[str, Any] | None = None,
        state_settings: bool = True,
    ) -> None:
        request = kit.AssemblyRequest(
            tokenizer=tokenizer, chat_format=chat_format, position_offset=position_offset,
            thinking=thinking, settings=settings,
        )  # fmt: skip
        self.target = kit.resolve_target(request, endpoint=endpoint, state_settings=state_settings)
        self._plans = kit.UsagePlans(
            self.target, on_mismatch=on_mismatch, tool_schemas=tool_schemas,
            fix=kit.tools_fix("PhaseAwareUsageCheck", verified=False),
        )  # fmt: skip
        self.on_check = on_check  # called with each UsageCheck (settable after construction)
        self.on_mismatch, self.tool_schemas = self._plans.on_mismatch, self._plans.tool_schemas
        self.position_offset, self.offsets = self.target.usage_offsets
        self._marks: dict[UUID, tuple[int, bool]] = {}  # run: (reply mark, asked for ids)

    def on_chat_model_start(
        self, serialized: dict[str, Any], messages: list[list[BaseMessage]], *, run_id: UUID,
        **kwargs: Any,
    ) -> None:  # fmt: skip
        if len(messages) == 1:  # one prompt per run is what a chat model call sends
            params = kwargs.get("invocation_params") or {}
            self._plans.start(run_id, message_dicts(messages[0]), tool_schemas(params.get("tools")))
            self._marks[run_id] = (reply_mark(), _asks(params, self.target.prompt_ids_field))

    def on_llm_error(self, error: BaseException, *, run_id: UUID, **kwargs: Any) -> None:
        self._plans.drop(run_id)
        self._marks.pop(run_id, None)

    def on_llm_end(self, response: LLMResult, *, run_id: UUID, **kwargs: Any) -> None:
        found = [*(m.response_metadata for m in _messages(response)), response.llm_output]
        model, fingerprint = next((i for i in map(served_identity, found) if any(i)), (None, None))
        reply_id = next((m.get("id") for m in found if m and isinstance(m.get("id"), str)), None)
        reported = reported_prompt_tokens(response)
        since, asked = self._marks.pop(run_id, (None, False))
        # a call that did not ask takes no reply of its context (one is not its own)
        raw = take_reply(reply_id, prompt_tokens=reported, since=since if asked else None)
        check = self._plans.end(
            run_id, reported_tokens=reported, served_model=model, system_fingerprint=fingerprint,
            raw=raw, count_only_reason=self._count_only(asked=asked, found=raw is not None),
        )  # fmt: skip
        if check is not None and self.on_check is not None:
            self.on_check(check)

    def _count_only(self, *, asked: bool, found: bool) -> str:
        """Why a check of this call compares counts only (``""``: the ids were found)."""
        field = self.target.prompt_ids_field
        if found:
            return ""
        if field is None:
            return self.target.prompt_ids_unasked(may_stream=False)
        if asked:
            return (
                "the request asked for them, but no reply carrying them was kept for this "
                "call (build the model with ChatOpenAI(**prompt_ids_clients()))"
            )
        bind = (
            "bind the model with PhaseAwarePrompt.model_kwargs(llm), llm built with "
            "ChatOpenAI(**prompt_ids_clients())"
        )
        streamed = self.target.prompt_ids_unasked(may_stream=True)
        if streamed:
            return f"{streamed} ({bind} and disable_streaming=True)"
        return f"the request did not ask for them ({field}): {bind}"


def _asks(params: Mapping[str, Any], field: str | None) -> bool:
    """Whether a call's invocation params ask for the prompt's ids (``extra_body[field]``)."""
    extra = params.get("extra_body")
    return field is not None and isinstance(extra, Mapping) and extra.get(field) is True
