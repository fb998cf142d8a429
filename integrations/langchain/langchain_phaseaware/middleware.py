"""``PhaseAwareMiddleware`` for ``langchain.agents.create_agent`` (extra ``agents``).

Before each model call (``wrap_model_call``) it looks at the newest tool result: the
last message when it is a ``ToolMessage`` that has not been aligned yet. Its
documents (the tool's ``artifact`` when that is a list of ``Document`` objects, as
``response_format="content_and_artifact"`` tools return them; else its text split
on ``document_separator``) are placed into that one message by
:func:`phaseaware.assemble_append` (through :func:`phaseaware.integrate.append_records`):
the conversation already sent keeps its bytes (checked on the final prompt, so a
server's prefix cache still hits), and the plan is for the residues the message
will have on every later call (out of the model's raw local window). Without
``options`` no evidence is restated (the core's ``repeat=False`` append default).

The aligned message replaces the original in the agent state (same message id,
through a ``Command`` returned with the model response), so every later call
resends exactly the bytes this call planned. Its ``response_metadata["phaseaware"]``
holds the placement report; a message carrying it is never aligned again.

``tool_role="user"``: for models whose chat format has no tool role (the shipped
reference model knows only user and assistant), the model is shown each tool
result as a user message and each tool-calling assistant turn as its text alone;
the state keeps the real tool messages.

Tools bound to the model (``request.tools``) are part of the plan: their OpenAI
schemas go into the chat format's settings, rendered where the server renders them
(``deepseek-v4``, ``deepseek-v4.1``). A format that does not render tools refuses
the request (``UnsupportedSettingError``, naming the fix) unless
``tool_schemas="not_rendered"`` says the server writes none into the prompt (the
shipped reference server); the usage check then confirms it on every aligned call.
Streaming (``stream``/``astream``/``astream_events``) goes through the same
``wrap_model_call``; the check reads the final usage chunk (``stream_usage=True``).
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
    message_dicts,
    message_text,
    served_identity,
    tool_schemas,
)
from langchain_phaseaware.prompt import placement_report
from phaseaware import AssemblyOptions, AssemblyResult, Profile
from phaseaware.errors import InputError
from phaseaware.integrate import (
    AssemblyRequest,
    ChatFormat,
    ChatSettings,
    EndpointRef,
    Tokenizer,
    append_records,
    check_on_mismatch,
    check_usage,
    resolve_target,
)

__all__ = ["PhaseAwareMiddleware", "REPORT_KEY"]

REPORT_KEY = "phaseaware"


def _model_view(messages: Sequence[BaseMessage], tool_role: str) -> list[AnyMessage]:
    """What the model is shown: the messages, or with ``tool_role="user"`` tool turns as text."""
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


class PhaseAwareMiddleware(AgentMiddleware):
    """Align the newest tool result before each model call (see the module docstring).

    Arguments as :class:`~langchain_phaseaware.PhaseAwarePrompt`; ``budget_tokens``
    bounds the whole conversation. ``tool_names``: align only results of these
    tools (default: any). ``check_usage``: compare the response's
    ``usage.prompt_tokens`` with the planned count after an aligned call
    (``"warn"``, ``"raise"`` or ``"ignore"``). ``message_template``: the aligned
    message's content, ``{context}`` once and ``{question}`` (the newest user
    message) any number of times, e.g. ``"{context}\n\n{question}"``.
    ``endpoint``: an endpoint record (as for ``PhaseAwarePrompt``); the usage
    check then expects its offset (any of its offsets when it varies).
    ``settings`` / ``thinking``: the chat settings the plan is made with; every model
    request states them (``model_settings["extra_body"]["chat_template_kwargs"]``), so
    the server renders what was planned. ``state_settings=False`` states nothing and
    plans with the endpoint record's ``server_default`` instead.
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
        if not isinstance(message_template, str) or message_template.count("{context}") != 1:
            raise InputError(
                f"message_template must hold {{context}} exactly once, got {message_template!r}"
            )
        if tool_role not in ("tool", "user"):
            raise InputError(f"tool_role must be 'tool' or 'user', got {tool_role!r}")
        if tool_schemas not in ("rendered", "not_rendered"):
            raise InputError(
                f"tool_schemas must be 'rendered' or 'not_rendered', got {tool_schemas!r}"
            )
        if not isinstance(document_separator, str) or not document_separator:
            raise InputError("document_separator must be a non-empty string")
        self.check_usage = check_on_mismatch(check_usage, name="check_usage")
        self.target = resolve_target(
            AssemblyRequest(
                tokenizer=tokenizer,
                chat_format=chat_format,
                profile=profile,
                budget_tokens=budget_tokens,
                options=options,
                position_offset=position_offset,
                thinking=thinking,
                settings=settings,
            ),
            endpoint=endpoint,
            state_settings=state_settings,
        )
        if not self.target.require_format().chat:
            raise InputError(
                "an agent sends messages: pass the chat format the server renders them with "
                "(deepseek-v4, chatml, hf), not 'none'"
            )
        self.tool_role = tool_role
        self.tool_names = frozenset(tool_names) if tool_names is not None else None
        self.document_separator = document_separator
        self.score_keys = tuple(score_keys)
        self.evidence_key = evidence_key
        self.message_template = message_template
        self.tool_schemas = tool_schemas

    # -- planning ---------------------------------------------------------------------------

    def _target(self, messages: Sequence[BaseMessage]) -> ToolMessage | None:
        last = messages[-1] if messages else None
        if not isinstance(last, ToolMessage) or REPORT_KEY in last.response_metadata:
            return None
        if self.tool_names is not None and last.name not in self.tool_names:
            return None
        return last

    def _documents(self, message: ToolMessage) -> list[Document]:
        artifact = message.artifact
        if (
            isinstance(artifact, list)
            and artifact
            and all(isinstance(d, Document) for d in artifact)
        ):
            return list(artifact)
        text = message_text(message, 0)
        return [Document(page_content=t) for t in text.split(self.document_separator) if t]

    def align(
        self,
        request: ModelRequest,
    ) -> tuple[ModelRequest, ToolMessage | None, AssemblyResult | None]:
        """The request to send, the aligned tool message (``None``: nothing to align)
        and its assembly. Pure: neither ``request`` nor its messages are changed."""
        messages = list(request.messages)
        target = self._target(messages)
        settings = self.target.merged_kwargs(request.model_settings)
        unchanged = request.override(
            messages=_model_view(messages, self.tool_role), model_settings=settings
        )
        if target is None:
            return unchanged, None, None
        plan_target = self.target
        if self.tool_schemas == "rendered":
            plan_target = self.target.with_tools(
                tool_schemas(request.tools),
                fix="; or pass tool_schemas='not_rendered' to PhaseAwareMiddleware if the "
                "server writes no tool schemas into the prompt (the usage check verifies it)",
            )
        documents = self._documents(target)
        history: list[BaseMessage] = (
            [request.system_message] if request.system_message is not None else []
        )
        history += messages[:-1]
        question = next(
            (
                message_text(m, i)
                for i, m in reversed(list(enumerate(messages)))
                if isinstance(m, HumanMessage)
            ),
            "",
        )
        new: dict[str, Any] = (
            {"role": "tool", "content": self.message_template, "tool_call_id": target.tool_call_id}
            if self.tool_role == "tool"
            else {"role": "user", "content": self.message_template}
        )
        result = append_records(
            document_records(documents, score_keys=self.score_keys, evidence_key=self.evidence_key),
            target=plan_target,
            sent=message_dicts(_model_view(history, self.tool_role)),
            new=new,
            question=question,
        )
        if result is None or result.messages is None:
            return unchanged, None, None
        report = placement_report(result, documents)
        report.pop("prompt")  # the whole conversation: the state holds it already
        metadata = {**target.response_metadata, REPORT_KEY: report}
        content = result.messages[-1]["content"]
        aligned = target.model_copy(update={"content": content, "response_metadata": metadata})
        view = _model_view([*messages[:-1], aligned], self.tool_role)
        return request.override(messages=view, model_settings=settings), aligned, result

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
