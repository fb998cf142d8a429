"""Phase-aware tool results for LlamaIndex agents (``FunctionAgent``, ``AgentWorkflow``):
:class:`PhaseAwareAgentLLM` runs the kit's agent step before each chat call (see
docs/agent-steps.md). ``ReActAgent`` re-renders its history: use ``FunctionAgent``."""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from typing import Any, Literal, Unpack

from llama_index.core.base.llms.types import (
    ChatMessage,
    ChatResponse,
    ChatResponseAsyncGen,
    ChatResponseGen,
    CompletionResponse,
    CompletionResponseAsyncGen,
    CompletionResponseGen,
    LLMMetadata,
    TextBlock,
    ToolCallBlock,
)
from llama_index.core.bridge.pydantic import BaseModel, Field, PrivateAttr
from llama_index.core.llms.function_calling import FunctionCallingLLM
from llama_index.core.retrievers import BaseRetriever
from llama_index.core.schema import NodeWithScore
from llama_index.core.tools import FunctionTool

from phaseaware import AssemblyResult, integrate

__all__ = ["AGENT_REPORT_KEY", "NodeRegistry", "PhaseAwareAgentLLM", "retriever_tool"]

AGENT_REPORT_KEY = integrate.REPORT_KEY  # the aligned tool message's additional_kwargs key


class NodeRegistry(integrate.SentMemory[list[NodeWithScore]]):
    """Tool output text -> the scored nodes it was made of (the kit's bounded memory)."""

    def __init__(self, max_entries: int = 256) -> None:
        super().__init__(max_entries)


def retriever_tool(
    retriever: BaseRetriever, registry: NodeRegistry, *, name: str, description: str,
    separator: str = "\n\n",
) -> FunctionTool:  # fmt: skip
    """A tool ``name(query)`` returning the retrieved nodes' texts joined by ``separator``;
    the nodes are registered under that text, so :class:`PhaseAwareAgentLLM` aligns them
    with their scores, ids and evidence."""

    def found(nodes: list[NodeWithScore]) -> str:
        text = separator.join(n.node.get_content() for n in nodes)
        registry.put(text, nodes)
        return text

    def search(query: str) -> str:
        return found(retriever.retrieve(query))

    async def asearch(query: str) -> str:
        return found(await retriever.aretrieve(query))

    return FunctionTool.from_defaults(
        fn=search, async_fn=asearch, name=name, description=description
    )


def _text(message: ChatMessage) -> str:
    return "".join(b.text for b in message.blocks if isinstance(b, TextBlock))


def _tool_calls(message: ChatMessage) -> list[Any]:
    """The message's tool calls as OpenAI-style dicts; one in ``additional_kwargs`` that is
    neither a mapping nor a pydantic model (a bare string) is passed on as it is, for the
    kit to judge as any malformed call (scanned under refuse, else its result unaligned)."""
    calls: list[Any] = []
    for block in message.blocks:
        if isinstance(block, ToolCallBlock):
            args = block.tool_kwargs
            arguments = json.dumps(args) if isinstance(args, dict) else args
            function = {"name": block.tool_name, "arguments": arguments}
            calls.append({"id": block.tool_call_id, "type": "function", "function": function})
    if calls:  # OpenAI clients send the blocks; additional_kwargs may repeat them
        return calls
    for raw in message.additional_kwargs.get("tool_calls") or ():
        calls.append(_raw_call(raw))
    return calls


def _raw_call(raw: object) -> Any:
    """One ``additional_kwargs`` tool call as a dict (a mapping, a pydantic model such as
    OpenAI's ``ChatCompletionMessageToolCall``), else as it came."""
    if isinstance(raw, Mapping):
        return dict(raw)
    return raw.model_dump() if isinstance(raw, BaseModel) else raw


def _tool_call_id(message: ChatMessage) -> object:
    """A tool result's tool call id (``None``: not a tool result)."""
    is_tool = str(message.role.value) == "tool"
    return message.additional_kwargs.get("tool_call_id") if is_tool else None


def _neutral_calls(message: ChatMessage, calls: Sequence[integrate.NeutralCall]) -> ChatMessage:
    """A new ``message`` with the kit's neutralised tool calls in place of its own (the
    blocks when it has them, else ``additional_kwargs["tool_calls"]``, as ``_tool_calls``
    reads them); ``message`` is not changed."""
    by_index = {c.index: c for c in calls}
    blocks = list(message.blocks)
    positions = [i for i, b in enumerate(blocks) if isinstance(b, ToolCallBlock)]
    if positions:
        for k, i in enumerate(positions):
            if k in by_index:
                new = {"tool_name": by_index[k].name, "tool_kwargs": by_index[k].arguments}
                blocks[i] = blocks[i].model_copy(update=new)
        return message.model_copy(update={"blocks": blocks})
    made = [_raw_call(c) for c in message.additional_kwargs.get("tool_calls") or ()]
    for k, call in by_index.items():
        arguments = json.dumps(call.arguments, ensure_ascii=False)
        made[k] = {**made[k], "function": {"name": call.name, "arguments": arguments}}
    kwargs = {**message.additional_kwargs, "tool_calls": made}
    return message.model_copy(update={"additional_kwargs": kwargs})


def _neutral_text(message: ChatMessage, text: integrate.NeutralText) -> ChatMessage:
    """A new ``message`` (an assistant turn, or a tool result sent unaligned) whose text
    blocks are one block of the kit's neutralised text (at the first text block's place;
    what the plan rendered, ``_text``), the other blocks kept; ``message`` is not changed. ``message_dict`` sends no reasoning (OpenAI clients drop
    ``ThinkingBlock``), so the kit never neutralises any here."""
    if text.content is None:
        return message
    blocks: list[Any] = []
    for block in message.blocks:
        if not isinstance(block, TextBlock):
            blocks.append(block)
        elif not any(isinstance(b, TextBlock) for b in blocks):
            blocks.append(block.model_copy(update={"text": text.content}))
    return message.model_copy(update={"blocks": blocks})


def _aligned(original: ChatMessage, step: integrate.AgentStep) -> ChatMessage:
    kwargs = {**original.additional_kwargs, AGENT_REPORT_KEY: step.report}
    return ChatMessage(role=original.role, content=step.content, additional_kwargs=kwargs)


def model_view(messages: Sequence[ChatMessage], tool_role: str) -> list[ChatMessage]:
    """The kit's ``model_view`` on LlamaIndex messages (what the model is shown): with
    ``tool_role="user"`` tool results as user messages and tool-calling assistant turns as
    their text alone (reports and ids stay in ``additional_kwargs``, which no client sends)."""
    if tool_role == "tool":
        return list(messages)
    view = []
    for message in messages:
        role = str(message.role.value)
        if role == "tool":
            view.append(ChatMessage(role="user", content=_text(message)))
        elif role == "assistant" and _tool_calls(message):
            view.append(ChatMessage(role="assistant", content=_text(message)))
        else:
            view.append(message)
    return view


def message_dict(message: ChatMessage) -> dict[str, Any]:
    """The OpenAI-style dict phaseaware renders for ``message`` (as OpenAI clients send it)."""
    role = str(message.role.value if hasattr(message.role, "value") else message.role)
    out: dict[str, Any] = {"role": role, "content": _text(message)}
    calls = _tool_calls(message) if role == "assistant" else []
    if calls:
        out["tool_calls"] = calls
    call_id = message.additional_kwargs.get("tool_call_id")
    if role == "tool" and call_id is not None:
        out["tool_call_id"] = call_id
    return out


_EFFORT_FIX = " (PhaseAwareAgentLLM(settings=ChatSettings(reasoning_effort=...)))"


class PhaseAwareAgentLLM(FunctionCallingLLM):
    """The agent's LLM with its newest tool result aligned (see docs/agent-steps.md).

    ``llm``: the wrapped LLM; the other arguments as for LangChain's
    ``PhaseAwareMiddleware`` (``budget_tokens``: the whole conversation; ``tool_role="user"``
    for a chat format without a tool role: tool results are sent as user messages). The aligned
    message carries its report in ``additional_kwargs["phaseaware"]`` (:meth:`report`).
    """

    llm: FunctionCallingLLM = Field(description="the wrapped function-calling LLM")
    check_usage: str = Field(
        default="warn", description="on a usage mismatch after an aligned call: warn, raise, ignore"
    )

    _step: integrate.AgentStepper[ChatMessage] = PrivateAttr()
    _registry: NodeRegistry = PrivateAttr()
    _tool_role: str = PrivateAttr()

    def __init__(
        self, *, llm: FunctionCallingLLM, registry: NodeRegistry | None = None,
        document_separator: str = "\n\n", message_template: str = "{context}",
        tool_names: Sequence[str] | None = None,
        check_usage: Literal["warn", "raise", "ignore"] = "warn",
        tool_schemas: Literal["rendered", "not_rendered"] = "rendered",
        tool_role: Literal["tool", "user"] = "tool",
        **target: Unpack[integrate.TargetArgs],
    ) -> None:  # fmt: skip
        policy = integrate.AgentPolicy(
            message_template=message_template, document_separator=document_separator,
            tool_names=frozenset(tool_names) if tool_names is not None else None,
            tool_schemas=tool_schemas, tool_role=tool_role,
        )  # fmt: skip
        on_mismatch = integrate.check_on_mismatch(check_usage, name="check_usage")
        super().__init__(llm=llm, check_usage=on_mismatch)
        resolved = integrate.target_of(target)
        integrate.require_chat(resolved)
        # an effort the wrapped LLM sends is planned with (or refused, saying how to set it)
        resolved = resolved.with_effort(integrate.call_effort(None, llm), fix=_EFFORT_FIX)
        self._step = integrate.AgentStepper(
            resolved, policy, convert=lambda m, _: message_dict(m), text=_text,
            adapter="PhaseAwareAgentLLM", rebuild_calls=_neutral_calls,
            rebuild_text=_neutral_text,
        )  # fmt: skip
        self._registry = registry if registry is not None else NodeRegistry()
        self._tool_role = tool_role

    @classmethod
    def class_name(cls) -> str:
        return "PhaseAwareAgentLLM"

    @property
    def metadata(self) -> LLMMetadata:
        return self.llm.metadata

    @property
    def target(self) -> integrate.Target:
        return self._step.target

    def report(self, tool_call_id: str) -> dict[str, Any] | None:
        """The report of the result sent for ``tool_call_id`` (``None``: none, forgotten)."""
        return self._step.report(tool_call_id)

    @property
    def last_report(self) -> dict[str, Any] | None:
        """The report on the newest aligned tool message (``None``: none yet)."""
        return self._step.last_report()

    def _records(self, message: ChatMessage) -> list[integrate.SourceRecord] | None:
        nodes = self._registry.get(_text(message))
        if nodes is None:
            return None
        return [
            integrate.SourceRecord(
                text=n.node.get_content(), score=n.score, id=n.node.node_id,
                evidence=n.node.metadata.get("evidence"),
            )
            for n in nodes
        ]  # fmt: skip

    def align(
        self, messages: Sequence[ChatMessage], tools: Sequence[Mapping[str, Any]] = ()
    ) -> tuple[list[ChatMessage], AssemblyResult | None]:
        """The messages to send (earlier tool results as sent before, the newest aligned,
        control strings the model wrote into its text or tool calls broken: the kit's
        ``CallNeutralizer``; those in tool results sent unaligned too: ``ResultNeutralizer``;
        the aligned result's nodes are found by the text the tool returned) and the new
        alignment (``None``: none); ``tools``: the bound OpenAI schemas. Under
        ``control_tokens="refuse"`` a control string in any of them raises
        ``ControlTokenError`` (naming the field and the fix) before any request."""
        out, step = self._step.align(
            messages, call_id=_tool_call_id, rebuild=_aligned, records=self._records, tools=tools,
            aligned=lambda m: AGENT_REPORT_KEY in m.additional_kwargs,
        )  # fmt: skip
        return out, step.result if step is not None else None

    def _send(
        self, messages: Sequence[ChatMessage], kwargs: Mapping[str, Any], *, stream: bool = False
    ) -> Any:
        # a call's own reasoning_effort is planned with from this call on (never sent beside
        # a plan made for another)
        self._step.target = self.target.with_effort(
            integrate.call_effort(kwargs, self.llm), fix=_EFFORT_FIX
        )
        sent, result = self.align(messages, tools=kwargs.get("tools") or ())
        fix = "; state them on PhaseAwareAgentLLM (settings=, thinking=)"
        # the prompt's ids where the server returns them (checked id for id); SGLang refuses
        # them with streaming
        merged = self.target.merged_kwargs(kwargs, fix=fix, prompt_ids=not stream)
        return model_view(sent, self._tool_role), result, merged  # the view the plan rendered

    def _checked(self, response: ChatResponse, result: AssemblyResult | None) -> ChatResponse:
        on_mismatch = self.check_usage  # a field: read at each call
        self._step.check(result, response.raw, on_mismatch=on_mismatch)  # type: ignore[arg-type]
        return response

    def reset(self) -> None:
        """Forget what was sent (a new conversation)."""
        self._step.reset()

    # the wrapped LLM's own tool handling and completions, passed through unchanged

    def _prepare_chat_with_tools(self, *args: Any, **kwargs: Any) -> dict[str, Any]:
        return self.llm._prepare_chat_with_tools(*args, **kwargs)

    def _validate_chat_with_tools_response(self, *args: Any, **kwargs: Any) -> ChatResponse:
        return self.llm._validate_chat_with_tools_response(*args, **kwargs)

    def get_tool_calls_from_response(self, *args: Any, **kwargs: Any) -> Any:
        return self.llm.get_tool_calls_from_response(*args, **kwargs)

    def complete(self, *args: Any, **kwargs: Any) -> CompletionResponse:
        return self.llm.complete(*args, **kwargs)

    async def acomplete(self, *args: Any, **kwargs: Any) -> CompletionResponse:
        return await self.llm.acomplete(*args, **kwargs)

    def stream_complete(self, *args: Any, **kwargs: Any) -> CompletionResponseGen:
        return self.llm.stream_complete(*args, **kwargs)

    async def astream_complete(self, *args: Any, **kwargs: Any) -> CompletionResponseAsyncGen:
        return await self.llm.astream_complete(*args, **kwargs)

    def chat(self, messages: Sequence[ChatMessage], **kwargs: Any) -> ChatResponse:
        sent, result, kwargs = self._send(messages, kwargs)
        return self._checked(self.llm.chat(sent, **kwargs), result)

    async def achat(self, messages: Sequence[ChatMessage], **kwargs: Any) -> ChatResponse:
        sent, result, kwargs = self._send(messages, kwargs)
        return self._checked(await self.llm.achat(sent, **kwargs), result)

    def stream_chat(self, messages: Sequence[ChatMessage], **kwargs: Any) -> ChatResponseGen:
        sent, result, kwargs = self._send(messages, kwargs, stream=True)
        stream = self.llm.stream_chat(sent, **kwargs)
        return integrate.then_last(stream, lambda r: self._checked(r, result))

    async def astream_chat(
        self, messages: Sequence[ChatMessage], **kwargs: Any
    ) -> ChatResponseAsyncGen:
        sent, result, kwargs = self._send(messages, kwargs, stream=True)
        stream = await self.llm.astream_chat(sent, **kwargs)
        return integrate.then_last_async(stream, lambda r: self._checked(r, result))
