"""``PhaseAwareMiddleware`` for ``langchain.agents.create_agent`` (extra ``agents``).

Before each model call (``wrap_model_call``) the newest tool result is aligned by the
integration kit's agent step (:mod:`phaseaware.integrate.agent`: which message, its
documents, the question, bound tools and the report are decided there, the same as for
LlamaIndex's ``PhaseAwareAgentLLM``): its documents (the tool's ``artifact`` when that
is a list of ``Document`` objects, as ``response_format="content_and_artifact"`` tools
return them) are placed into that one message by :func:`phaseaware.assemble_append`:
what was sent keeps its bytes and the plan is for the residues the message keeps on
every later call. The aligned message replaces the original in the agent state (same
id, through a ``Command``), so every later call resends the planned bytes; its
``response_metadata["phaseaware"]`` holds the placement report, and a message carrying
it is never aligned again. Streaming goes through the same ``wrap_model_call``; the
usage check reads the final usage chunk (``stream_usage=True``).
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Mapping, Sequence
from pathlib import Path
from typing import Any, Literal, cast

from langchain.agents.middleware import (
    AgentMiddleware,
    ExtendedModelResponse,
    ModelRequest,
    ModelResponse,
)
from langchain_core.documents import Document
from langchain_core.messages import AIMessage, AnyMessage, BaseMessage, HumanMessage, ToolMessage
from langchain_core.runnables.config import run_in_executor
from langgraph.types import Command

from langchain_phaseaware.convert import (
    SCORE_KEYS,
    document_records,
    message_dict,
    message_text,
    served_identity,
    tool_schemas,
)
from phaseaware import AssemblyOptions, AssemblyResult, Profile
from phaseaware.errors import InputError
from phaseaware.integrate import (
    REPORT_KEY,
    AgentPolicy,
    AssemblyRequest,
    ChatFormat,
    ChatSettings,
    EndpointRef,
    MessageMemo,
    Tokenizer,
    align_step,
    check_on_mismatch,
    check_usage,
    resolve_target,
    step_index,
)

__all__ = ["PhaseAwareMiddleware", "REPORT_KEY"]


def _model_view(messages: Sequence[BaseMessage], tool_role: str) -> list[AnyMessage]:
    """The kit's ``model_view`` on LangChain messages (what the model is shown)."""
    if tool_role == "tool":
        return cast(list[AnyMessage], list(messages))
    view: list[AnyMessage] = []
    for index, message in enumerate(messages):
        if isinstance(message, ToolMessage):
            view.append(HumanMessage(content=message_text(message, index), id=message.id))
        elif isinstance(message, AIMessage) and message.tool_calls:
            view.append(AIMessage(content=message_text(message, index), id=message.id))
        else:
            view.append(cast(AnyMessage, message))
    return view


def _documents(message: ToolMessage) -> list[Document] | None:
    artifact = message.artifact
    if isinstance(artifact, list) and artifact and all(isinstance(d, Document) for d in artifact):
        return list(artifact)
    return None


class PhaseAwareMiddleware(AgentMiddleware):
    """Align the newest tool result before each model call (see the module docstring).

    The assembly arguments as :class:`~langchain_phaseaware.PhaseAwarePrompt`'s;
    ``budget_tokens`` bounds the whole conversation. ``message_template``,
    ``document_separator``, ``tool_names``, ``tool_role`` and ``tool_schemas``: the
    kit's :class:`~phaseaware.integrate.AgentPolicy`. ``check_usage``: compare the
    response's ``usage.prompt_tokens`` with the plan after an aligned call (``"warn"``,
    ``"raise"``, ``"ignore"``; the endpoint record's offset is expected).
    """

    def __init__(
        self,
        *,
        tokenizer: str | Tokenizer,
        chat_format: str | ChatFormat,
        profile: str | Path | Profile | None,
        budget_tokens: int,
        options: AssemblyOptions | Mapping[str, Any] | None = None,
        position_offset: int | None = None,
        endpoint: EndpointRef = None,
        thinking: bool = False,
        settings: ChatSettings | Mapping[str, Any] | None = None,
        state_settings: bool = True,
        tool_role: Literal["tool", "user"] = "tool",
        tool_names: Sequence[str] | None = None,
        document_separator: str = "\n\n",
        score_keys: Sequence[str] = SCORE_KEYS,
        evidence_key: str | None = "evidence",
        check_usage: Literal["warn", "raise", "ignore"] = "warn",
        message_template: str = "{context}",
        tool_schemas: Literal["rendered", "not_rendered"] = "rendered",
    ) -> None:
        super().__init__()
        self.policy = AgentPolicy(
            message_template=message_template, document_separator=document_separator,
            tool_names=frozenset(tool_names) if tool_names is not None else None,
            tool_role=tool_role, tool_schemas=tool_schemas,
        )  # fmt: skip
        self.check_usage = check_on_mismatch(check_usage, name="check_usage")
        request = AssemblyRequest(
            tokenizer=tokenizer, chat_format=chat_format, profile=profile,
            budget_tokens=budget_tokens, options=options, position_offset=position_offset,
            thinking=thinking, settings=settings,
        )  # fmt: skip
        self.target = resolve_target(request, endpoint=endpoint, state_settings=state_settings)
        if not self.target.require_format().chat:
            raise InputError(
                "an agent sends messages: pass the chat format the server renders them with "
                "(deepseek-v4, chatml, hf), not 'none'"
            )
        self.score_keys = tuple(score_keys)
        self.evidence_key = evidence_key
        self._warned = [False]
        self._dicts = MessageMemo(message_dict, lambda m: m.content)

    def align(
        self,
        request: ModelRequest,
    ) -> tuple[ModelRequest, ToolMessage | None, AssemblyResult | None]:
        """The request to send, the aligned tool message (``None``: nothing to align)
        and its assembly. Pure: neither ``request`` nor its messages are changed."""
        messages = list(request.messages)
        settings = self.target.merged_kwargs(request.model_settings)
        unchanged = request.override(
            messages=_model_view(messages, self.policy.tool_role), model_settings=settings
        )
        system = [request.system_message] if request.system_message is not None else []
        dicts = self._dicts.dicts([*system, *messages])
        everything = [*system, *messages]
        index = step_index(
            dicts,
            policy=self.policy,
            aligned=lambda i: REPORT_KEY in everything[i].response_metadata,
            warned=self._warned,
        )
        if index is None:
            return unchanged, None, None
        tool = cast(ToolMessage, everything[index])
        documents = _documents(tool)
        records = ids = None
        if documents is not None:
            records = document_records(
                documents, score_keys=self.score_keys, evidence_key=self.evidence_key
            )
            ids = [d.id for d in documents]
        step = align_step(
            self.target, self.policy, messages=dicts, index=index, records=records, ids=ids,
            tools=tool_schemas(request.tools),
            fix="; or pass tool_schemas='not_rendered' to PhaseAwareMiddleware if the server "
            "writes no tool schemas into the prompt (the usage check verifies it)",
        )  # fmt: skip
        if step is None:
            return unchanged, None, None
        metadata = {**tool.response_metadata, REPORT_KEY: step.report}
        aligned = tool.model_copy(update={"content": step.content, "response_metadata": metadata})
        view = _model_view([*messages[:-1], aligned], self.policy.tool_role)
        return request.override(messages=view, model_settings=settings), aligned, step.result

    def _finish(
        self,
        response: ModelResponse,
        aligned: ToolMessage | None,
        result: AssemblyResult | None,
    ) -> ModelResponse | ExtendedModelResponse:
        if aligned is None or result is None:
            return response
        reply = next((m for m in response.result if isinstance(m, AIMessage)), None)
        usage = reply.usage_metadata if reply is not None else None
        if reply is not None and usage is not None and "input_tokens" in usage:
            served_model, fingerprint = served_identity(reply.response_metadata)
            check_usage(
                self.target,
                planned_tokens=result.token_count,
                reported_tokens=int(usage["input_tokens"]),
                on_mismatch=self.check_usage,
                served_model=served_model,
                system_fingerprint=fingerprint,
            )
        return ExtendedModelResponse(
            model_response=response, command=Command(update={"messages": [aligned]})
        )

    # -- AgentMiddleware --------------------------------------------------------------------

    def wrap_model_call(
        self,
        request: ModelRequest,
        handler: Callable[[ModelRequest], ModelResponse],
    ) -> ModelResponse | ExtendedModelResponse:
        sent, aligned, result = self.align(request)
        return self._finish(handler(sent), aligned, result)

    async def awrap_model_call(
        self,
        request: ModelRequest,
        handler: Callable[[ModelRequest], Awaitable[ModelResponse]],
    ) -> ModelResponse | ExtendedModelResponse:
        """As ``wrap_model_call``; the CPU-bound assembly runs in the default executor."""
        sent, aligned, result = await run_in_executor(None, self.align, request)
        return self._finish(await handler(sent), aligned, result)
