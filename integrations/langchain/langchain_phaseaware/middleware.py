"""``PhaseAwareMiddleware`` for ``langchain.agents.create_agent`` (extra ``agents``).

After an aligned call the prompt is checked at the server. Where the endpoint record names
a server that returns the prompt's ids (vLLM, SGLang) and the chat model was built with
:func:`~langchain_phaseaware.served.prompt_ids_clients`, which keeps the reply body, streamed
or not (why and how: :mod:`langchain_phaseaware.served`), the request asks for them and the
check is id for id: a mismatch names the first differing position. Otherwise the request
asks for nothing (nothing would read the ids) and the check is the count (``usage_metadata
["input_tokens"]``; a stream's from its usage chunk, ``stream_usage``). So is SGLang's
unless the chat model has ``disable_streaming=True``: SGLang refuses the field on a stream.
``on_check`` receives each check: its ``ids_compared`` says which was made, and a count-only
check's ``count_only_reason`` why (also in its warning).
"""

from __future__ import annotations

import json
from collections.abc import Awaitable, Callable, Sequence
from typing import Literal, Unpack, cast

from langchain.agents.middleware import (
    AgentMiddleware,
    ExtendedModelResponse,
    ModelRequest,
    ModelResponse,
)
from langchain_core.documents import Document
from langchain_core.language_models import BaseChatModel
from langchain_core.messages import AIMessage, AnyMessage, BaseMessage, HumanMessage, ToolMessage
from langchain_core.runnables.config import run_in_executor
from langgraph.types import Command

import phaseaware.integrate as kit
from langchain_phaseaware.convert import (
    SCORE_KEYS,
    document_records,
    message_dict,
    message_text,
    served_identity,
    tool_schemas,
)
from langchain_phaseaware.served import capture, captured, delivers_replies, reply_body
from phaseaware import AssemblyResult

__all__ = ["PhaseAwareMiddleware", "REPORT_KEY"]

REPORT_KEY = kit.REPORT_KEY  # the aligned tool message's metadata key holding its report


def _model_view(messages: Sequence[BaseMessage], tool_role: str) -> list[AnyMessage]:
    """The kit's ``model_view`` on LangChain messages (what the model is shown)."""
    if tool_role == "tool":
        return cast(list[AnyMessage], list(messages))
    view: list[AnyMessage] = []
    for index, message in enumerate(messages):
        if isinstance(message, ToolMessage):
            view.append(HumanMessage(content=message_text(message, index), id=message.id))
        elif isinstance(message, AIMessage) and (message.tool_calls or message.invalid_tool_calls):
            view.append(AIMessage(content=message_text(message, index), id=message.id))
        else:
            view.append(cast(AnyMessage, message))
    return view


def _neutral_calls(message: BaseMessage, calls: Sequence[kit.NeutralCall]) -> BaseMessage:
    """A new ``message`` (an ``AIMessage``) with the kit's neutralised tool calls in place
    of its own; ``message`` is not changed."""
    ai = cast(AIMessage, message)
    made = [dict(c) for c in ai.tool_calls]
    invalid = [dict(c) for c in ai.invalid_tool_calls]  # after the valid ones (message_dict)
    for call in calls:
        if call.index < len(made):
            made[call.index] = {**made[call.index], "name": call.name, "args": call.arguments}
        else:  # an invalid call whose arguments the kit could read: kept as text
            k = call.index - len(made)
            arguments = json.dumps(call.arguments, ensure_ascii=False)
            invalid[k] = {**invalid[k], "name": call.name, "args": arguments}
    return message.model_copy(update={"tool_calls": made, "invalid_tool_calls": invalid})


def _neutral_text(message: BaseMessage, text: kit.NeutralText) -> BaseMessage:
    """A new ``message`` (an ``AIMessage``, or a ``ToolMessage`` sent unaligned) whose
    content is the kit's neutralised text (one string: what the plan rendered, list content
    joined); ``message`` is not changed. ``message_dict`` sends no reasoning, so the kit
    never neutralises any here."""
    if text.content is None:
        return message
    return message.model_copy(update={"content": text.content})


def _artifact_records(
    message: ToolMessage, score_keys: Sequence[str], evidence_key: str | None
) -> tuple[list[kit.SourceRecord] | None, list[str | None] | None]:
    """The records and ids of the tool's ``artifact`` when that is a list of ``Document``."""
    docs = message.artifact
    if not (isinstance(docs, list) and docs and all(isinstance(d, Document) for d in docs)):
        return None, None
    records = document_records(docs, score_keys=score_keys, evidence_key=evidence_key)
    return records, [d.id for d in docs]


class PhaseAwareMiddleware(AgentMiddleware):
    """Before each model call the kit's agent step (:mod:`phaseaware.integrate.agent`) aligns
    the newest tool result (its documents: the tool's ``artifact`` when that is a list of
    ``Document``); the aligned message replaces the original in the agent state (same id,
    via a ``Command``), its ``response_metadata["phaseaware"]`` holding the report. The
    target arguments as ``PhaseAwarePrompt``'s (``budget_tokens``: the whole conversation);
    the agent-step ones: the kit's ``AgentPolicy``; ``check_usage``: on a usage mismatch
    after an aligned call, ``"warn"``, ``"raise"`` or ``"ignore"``; ``on_check``: called
    with each ``UsageCheck`` (ids or count: the module docstring)."""

    def __init__(
        self,
        *,
        tool_role: Literal["tool", "user"] = "tool",
        tool_names: Sequence[str] | None = None,
        document_separator: str = "\n\n",
        score_keys: Sequence[str] = SCORE_KEYS,
        evidence_key: str | None = "evidence",
        check_usage: Literal["warn", "raise", "ignore"] = "warn",
        message_template: str = "{context}",
        tool_schemas: Literal["rendered", "not_rendered"] = "rendered",
        on_check: Callable[[kit.UsageCheck], None] | None = None,
        **target: Unpack[kit.TargetArgs],
    ) -> None:
        super().__init__()
        self.policy = kit.AgentPolicy(
            message_template=message_template, document_separator=document_separator,
            tool_names=frozenset(tool_names) if tool_names is not None else None,
            tool_role=tool_role, tool_schemas=tool_schemas,
        )  # fmt: skip
        self.check_usage = kit.check_on_mismatch(check_usage, name="check_usage")
        self.target = kit.target_of(target)
        kit.require_chat(self.target)
        self.score_keys = tuple(score_keys)
        self.evidence_key = evidence_key
        self.on_check = on_check
        self._warned = [False]
        self._dicts = kit.MessageMemo(message_dict, lambda m: m.content)
        self._calls = kit.CallNeutralizer(
            convert=message_dict, rebuild=_neutral_calls, rebuild_text=_neutral_text
        )
        self._results = kit.ResultNeutralizer(convert=message_dict, rebuild=_neutral_text)

    def align(
        self, request: ModelRequest, *, asynchronous: bool = False
    ) -> tuple[ModelRequest, ToolMessage | None, AssemblyResult | None]:
        """The request to send, the aligned tool message (``None``: none) and its assembly;
        ``request`` and its messages are unchanged. Control strings the model wrote into
        its text or its tool calls are broken in what is sent, aligned or not (the kit's
        ``CallNeutralizer``), and so are those in every tool result sent unaligned (the
        kit's ``ResultNeutralizer``); under ``control_tokens="refuse"`` any of them raises
        ``ControlTokenError`` (naming the field and the fix) before any request.
        ``asynchronous``: the call goes through the model's async client (whose hooks
        decide whether the prompt's ids are asked for)."""
        # the model's own reasoning_effort (bound or on the call) is planned with, or refused
        target = self.target.with_effort(
            kit.call_effort(request.model_settings, request.model),
            fix=" (PhaseAwareMiddleware(settings=ChatSettings(reasoning_effort=...)))",
        )
        asks = not self.ids_unasked(request.model, asynchronous=asynchronous)
        settings = target.merged_kwargs(request.model_settings, prompt_ids=asks)
        system = [request.system_message] if request.system_message is not None else []
        made = [*system, *request.messages]  # the model's turns: control strings broken
        everything, dicts = self._calls.neutral(target, made, self._dicts.dicts(made))
        index = kit.step_index(
            dicts, policy=self.policy, warned=self._warned,
            aligned=lambda i: REPORT_KEY in everything[i].response_metadata,
        )  # fmt: skip
        # every tool result sent unaligned: control strings broken (the aligned one: by assembly)
        everything, dicts = self._results.neutral(target, everything, dicts, keep=index)
        step = None
        if index is not None:
            tool = cast(ToolMessage, everything[index])
            records, ids = _artifact_records(tool, self.score_keys, self.evidence_key)
            step = kit.align_step(
                target, self.policy, messages=dicts, index=index, records=records, ids=ids,
                tools=tool_schemas(request.tools), fix=kit.tools_fix("PhaseAwareMiddleware"),
            )  # fmt: skip
        if step is None:  # the newest result too goes out as it is: broken
            everything, _ = self._results.neutral(target, everything, dicts)
            view = _model_view(everything[len(system) :], self.policy.tool_role)
            return request.override(messages=view, model_settings=settings), None, None
        messages = everything[len(system) :]
        metadata = {**tool.response_metadata, REPORT_KEY: step.report}
        aligned = tool.model_copy(update={"content": step.content, "response_metadata": metadata})
        view = _model_view([*messages[:-1], aligned], self.policy.tool_role)
        return request.override(messages=view, model_settings=settings), aligned, step.result

    def ids_unasked(self, model: BaseChatModel, *, asynchronous: bool) -> str:
        """Why a call of ``model`` does not ask for the prompt's ids (``""``: it asks): the
        server returns none, or refuses the field on a stream that the model may send
        (SGLang; only a model with streaming disabled is sure not to stream), or the
        model's client hands no reply body over. A count-only check names it."""
        unasked = self.target.prompt_ids_unasked(may_stream=model.disable_streaming is not True)
        if unasked and not self.target.prompt_ids_unasked(may_stream=False):
            return f"{unasked} (a chat model with disable_streaming=True asks)"
        if unasked or delivers_replies(model, asynchronous=asynchronous):
            return unasked
        return (
            "the chat model's client hands no reply body over (build it with "
            "ChatOpenAI(**prompt_ids_clients()))"
        )

    def _check(self, reply: AIMessage, result: AssemblyResult, unasked: str) -> None:
        """The prompt at the server: id for id from the reply's body (kept by the model's
        clients in this call's :func:`capture`, a stream's once read) when it carries the
        ids, else the count in ``usage_metadata``, naming why (``unasked``: why the call
        did not ask); nothing without either."""
        usage = reply.usage_metadata
        count = int(usage["input_tokens"]) if usage and "input_tokens" in usage else None
        body = reply_body(captured(), reply.response_metadata.get("id"))
        tokenizer = self.target.tokenizer
        if body is not None:
            check = kit.check_raw_usage(
                self.target, planned_tokens=result.token_count, raw=body,
                on_mismatch=self.check_usage, reported_tokens=count,
                planned_ids=lambda: tokenizer.encode(result.prompt),  # only where ids came back
                count_only_reason=unasked or "the server's reply carried no prompt ids",
            )  # fmt: skip
        elif count is not None:
            model, fingerprint = served_identity(reply.response_metadata)
            check = kit.check_usage(
                self.target, planned_tokens=result.token_count, reported_tokens=count,
                on_mismatch=self.check_usage, served_model=model, system_fingerprint=fingerprint,
                count_only_reason=unasked or "no reply body was kept for this call",
            )  # fmt: skip
        else:
            return
        if check is not None and self.on_check is not None:
            self.on_check(check)

    def _finish(
        self,
        response: ModelResponse,
        sent: ModelRequest,
        aligned: ToolMessage | None,
        result: AssemblyResult | None,
        *,
        asynchronous: bool,
    ) -> ModelResponse | ExtendedModelResponse:
        if aligned is None or result is None:
            return response
        reply = next((m for m in response.result if isinstance(m, AIMessage)), None)
        if reply is not None:
            unasked = self.ids_unasked(sent.model, asynchronous=asynchronous)
            self._check(reply, result, unasked)
        return ExtendedModelResponse(
            model_response=response, command=Command(update={"messages": [aligned]})
        )

    def wrap_model_call(
        self, request: ModelRequest, handler: Callable[[ModelRequest], ModelResponse]
    ) -> ModelResponse | ExtendedModelResponse:
        sent, aligned, result = self.align(request)
        with capture():  # the replies, where the model's clients keep them (streams too)
            return self._finish(handler(sent), sent, aligned, result, asynchronous=False)

    async def awrap_model_call(
        self, request: ModelRequest, handler: Callable[[ModelRequest], Awaitable[ModelResponse]]
    ) -> ModelResponse | ExtendedModelResponse:
        """As ``wrap_model_call``; the CPU-bound assembly runs in the default executor."""
        sent, aligned, result = await run_in_executor(None, self.align, request, asynchronous=True)
        with capture():
            return self._finish(await handler(sent), sent, aligned, result, asynchronous=True)
