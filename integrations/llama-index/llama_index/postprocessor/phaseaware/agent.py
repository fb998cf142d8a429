"""Phase-aware tool results for LlamaIndex agents (``FunctionAgent``, ``AgentWorkflow``).

:class:`PhaseAwareAgentLLM` wraps the agent's function-calling LLM (e.g. ``OpenAILike``).
Before each chat call it aligns the newest tool result by the integration kit's agent
step (:mod:`phaseaware.integrate.agent`: which message, its documents, the question,
bound tools and the report are decided there, exactly as for LangChain's
``PhaseAwareMiddleware``), through :func:`phaseaware.assemble_append`: what was sent
keeps its bytes, positions are absolute in the whole conversation, and the response's
``usage.prompt_tokens`` is checked against the plan.

Why wrap the LLM: LlamaIndex has no public hook before each model call, and a tool
cannot align (its positions depend on everything before it, which it never sees). The
LLM receives the exact message list the server renders, on every step of every
``FunctionAgent``, streaming or not. The agent keeps its original tool messages; the
wrapper remembers what it sent for each tool call id (the kit's bounded memory) and
sends that again on later steps, so earlier bytes never change. ``ReActAgent`` renders
its whole history as text each step (no stable tool message): use ``FunctionAgent``.

Documents of a tool result: the nodes that :func:`retriever_tool` registered for that
text (score, id, ``metadata["evidence"]``), else its text split on
``document_separator``. Bound tools are rendered into the plan where the chat format
renders them (``deepseek-v4``); ``tool_schemas="not_rendered"`` for a server that
writes none into the prompt.
"""

from __future__ import annotations

import json
from collections.abc import AsyncGenerator, Generator, Mapping, Sequence
from pathlib import Path
from typing import Any, Literal

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
from llama_index.core.bridge.pydantic import Field, PrivateAttr
from llama_index.core.llms.function_calling import FunctionCallingLLM
from llama_index.core.retrievers import BaseRetriever
from llama_index.core.schema import NodeWithScore
from llama_index.core.tools import BaseTool, FunctionTool

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
    SentMemory,
    SourceRecord,
    Target,
    Tokenizer,
    align_step,
    check_on_mismatch,
    check_usage,
    reported_identity,
    reported_prompt_tokens,
    resolve_target,
    step_index,
)

__all__ = ["AGENT_REPORT_KEY", "NodeRegistry", "PhaseAwareAgentLLM", "retriever_tool"]

AGENT_REPORT_KEY = REPORT_KEY  # the aligned tool message's additional_kwargs key


class NodeRegistry(SentMemory[list[NodeWithScore]]):
    """Tool output text -> the scored nodes it was made of (the kit's bounded memory)."""

    def __init__(self, max_entries: int = 256) -> None:
        super().__init__(max_entries)


def retriever_tool(
    retriever: BaseRetriever,
    registry: NodeRegistry,
    *,
    name: str,
    description: str,
    separator: str = "\n\n",
) -> FunctionTool:
    """A tool ``name(query)`` returning the retrieved nodes' texts joined by ``separator``;
    the nodes are registered under that text, so :class:`PhaseAwareAgentLLM` aligns them
    with their scores, ids and evidence."""

    def search(query: str) -> str:
        nodes = retriever.retrieve(query)
        text = separator.join(n.node.get_content() for n in nodes)
        registry.put(text, nodes)
        return text

    async def asearch(query: str) -> str:
        nodes = await retriever.aretrieve(query)
        text = separator.join(n.node.get_content() for n in nodes)
        registry.put(text, nodes)
        return text

    return FunctionTool.from_defaults(
        fn=search, async_fn=asearch, name=name, description=description
    )


def _text(message: ChatMessage) -> str:
    return "".join(b.text for b in message.blocks if isinstance(b, TextBlock))


def _tool_calls(message: ChatMessage) -> list[dict[str, Any]]:
    calls = []
    for block in message.blocks:
        if isinstance(block, ToolCallBlock):
            args = block.tool_kwargs
            calls.append(
                {
                    "id": block.tool_call_id,
                    "type": "function",
                    "function": {
                        "name": block.tool_name,
                        "arguments": json.dumps(args) if isinstance(args, dict) else args,
                    },
                }
            )
    if calls:  # OpenAI clients send the blocks; additional_kwargs may repeat them
        return calls
    for raw in message.additional_kwargs.get("tool_calls") or ():
        call = raw if isinstance(raw, Mapping) else raw.model_dump()
        calls.append(dict(call))
    return calls


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


class PhaseAwareAgentLLM(FunctionCallingLLM):
    """The agent's LLM with its newest tool result aligned (see the module docstring).

    ``llm``: the function-calling LLM that talks to the server. The assembly arguments
    and ``message_template``, ``document_separator``, ``tool_names``, ``tool_schemas``
    and ``check_usage`` mean what they mean for LangChain's ``PhaseAwareMiddleware``
    (the kit's :class:`~phaseaware.integrate.AgentPolicy`); ``budget_tokens`` bounds the
    whole conversation. The aligned tool message sent carries its placement report in
    ``additional_kwargs["phaseaware"]`` (:meth:`report` gives it by tool call id).
    """

    llm: FunctionCallingLLM = Field(description="the wrapped function-calling LLM")
    check_usage: str = Field(
        default="warn", description="on a usage mismatch after an aligned call: warn, raise, ignore"
    )

    _target: Target = PrivateAttr()
    _policy: AgentPolicy = PrivateAttr()
    _registry: NodeRegistry = PrivateAttr()
    _sent: SentMemory[tuple[str, ChatMessage]] = PrivateAttr()
    _dicts: MessageMemo = PrivateAttr()
    _warned: list[bool] = PrivateAttr()

    def __init__(
        self,
        *,
        llm: FunctionCallingLLM,
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
        registry: NodeRegistry | None = None,
        document_separator: str = "\n\n",
        message_template: str = "{context}",
        tool_names: Sequence[str] | None = None,
        check_usage: Literal["warn", "raise", "ignore"] = "warn",
        tool_schemas: Literal["rendered", "not_rendered"] = "rendered",
    ) -> None:
        policy = AgentPolicy(
            message_template=message_template, document_separator=document_separator,
            tool_names=frozenset(tool_names) if tool_names is not None else None,
            tool_schemas=tool_schemas,
        )  # fmt: skip
        super().__init__(llm=llm, check_usage=check_on_mismatch(check_usage, name="check_usage"))
        request = AssemblyRequest(
            tokenizer=tokenizer, chat_format=chat_format, profile=profile,
            budget_tokens=budget_tokens, options=options, position_offset=position_offset,
            thinking=thinking, settings=settings,
        )  # fmt: skip
        self._target = resolve_target(request, endpoint=endpoint, state_settings=state_settings)
        if not self._target.require_format().chat:
            raise InputError("an agent sends messages: pass its chat format (deepseek-v4, ...)")
        self._policy = policy
        self._registry = registry if registry is not None else NodeRegistry()
        self._sent = SentMemory()
        self._dicts = MessageMemo(lambda m, _: message_dict(m), _text)
        self._warned = [False]

    @classmethod
    def class_name(cls) -> str:
        return "PhaseAwareAgentLLM"

    @property
    def metadata(self) -> LLMMetadata:
        return self.llm.metadata

    @property
    def target(self) -> Target:
        """The resolved tokenizer, chat format, profile, budget, options and endpoint."""
        return self._target

    def report(self, tool_call_id: str) -> dict[str, Any] | None:
        """The placement report of the tool result sent for ``tool_call_id`` (``None``:
        not aligned, or forgotten)."""
        known = self._sent.get(tool_call_id)
        return None if known is None else known[1].additional_kwargs.get(REPORT_KEY)

    @property
    def last_report(self) -> dict[str, Any] | None:
        """The report on the newest aligned tool message (``None``: none yet)."""
        newest = self._sent.newest()
        return None if newest is None else newest[1].additional_kwargs.get(REPORT_KEY)

    # -- alignment --------------------------------------------------------------------------

    def _records(self, text: str) -> tuple[list[SourceRecord] | None, list[object] | None]:
        nodes = self._registry.get(text)
        if nodes is None:
            return None, None
        records = [
            SourceRecord(text=n.node.get_content(), score=n.score, id=n.node.node_id,
                         evidence=n.node.metadata.get("evidence"))
            for n in nodes
        ]  # fmt: skip
        return records, [r.id for r in records]

    def _replayed(self, message: ChatMessage) -> ChatMessage:
        """The message as sent before (an aligned tool result), else ``message``."""
        call_id = message.additional_kwargs.get("tool_call_id")
        if str(message.role.value) != "tool" or not isinstance(call_id, str):
            return message
        known = self._sent.get(call_id)
        return known[1] if known is not None and known[0] == _text(message) else message

    def align(
        self, messages: Sequence[ChatMessage], tools: Sequence[Mapping[str, Any]] = ()
    ) -> tuple[list[ChatMessage], AssemblyResult | None]:
        """The messages to send (earlier aligned tool results as sent before, the newest
        one aligned now) and the newest alignment (``None``: nothing new). ``tools``: the
        OpenAI schemas the request binds. Pure for the caller: its messages are unchanged."""
        out = [self._replayed(m) for m in messages]
        dicts = self._dicts.dicts(out)
        index = step_index(
            dicts, policy=self._policy, aligned=lambda i: REPORT_KEY in out[i].additional_kwargs,
            warned=self._warned,
        )  # fmt: skip
        if index is None:
            return out, None
        original = out[index]
        records, ids = self._records(_text(original))
        step = align_step(
            self._target, self._policy, messages=dicts, index=index, records=records, ids=ids,
            tools=tools, fix="; or pass tool_schemas='not_rendered' to PhaseAwareAgentLLM if "
            "the server writes no tool schemas into the prompt (the usage check verifies it)",
        )  # fmt: skip
        if step is None:
            return out, None
        kwargs = {**original.additional_kwargs, REPORT_KEY: step.report}
        sent_now = ChatMessage(role=original.role, content=step.content, additional_kwargs=kwargs)
        self._sent.put(str(original.additional_kwargs["tool_call_id"]), (_text(original), sent_now))
        out[index] = sent_now
        return out, step.result

    def _kwargs(self, kwargs: Mapping[str, Any]) -> dict[str, Any]:
        """The call's kwargs with the chat settings the plan was made with stated."""
        merged: dict[str, Any] = self._target.merged_kwargs(
            kwargs, fix="; state them on PhaseAwareAgentLLM (settings=, thinking=)"
        )
        return merged

    def _check(self, response: ChatResponse, result: AssemblyResult | None) -> None:
        if result is None:
            return
        served_model, fingerprint = reported_identity(response.raw)
        check_usage(
            self._target,
            planned_tokens=result.token_count,
            reported_tokens=reported_prompt_tokens(response.raw),
            on_mismatch=self.check_usage,  # type: ignore[arg-type]
            served_model=served_model,
            system_fingerprint=fingerprint,
        )

    def _send(self, messages: Sequence[ChatMessage], kwargs: Mapping[str, Any]) -> Any:
        sent, result = self.align(messages, tools=kwargs.get("tools") or ())
        return sent, result, self._kwargs(kwargs)

    def reset(self) -> None:
        """Forget what was sent (a new conversation)."""
        self._sent.clear()
        self._dicts.clear()

    # -- FunctionCallingLLM -----------------------------------------------------------------

    def _prepare_chat_with_tools(
        self,
        tools: Sequence[BaseTool],
        user_msg: str | ChatMessage | None = None,
        chat_history: list[ChatMessage] | None = None,
        verbose: bool = False,
        allow_parallel_tool_calls: bool = False,
        tool_required: bool = False,
        **kwargs: Any,
    ) -> dict[str, Any]:
        return self.llm._prepare_chat_with_tools(
            tools,
            user_msg=user_msg,
            chat_history=chat_history,
            verbose=verbose,
            allow_parallel_tool_calls=allow_parallel_tool_calls,
            tool_required=tool_required,
            **kwargs,
        )

    def _validate_chat_with_tools_response(
        self,
        response: ChatResponse,
        tools: Sequence[BaseTool],
        allow_parallel_tool_calls: bool = False,
        **kwargs: Any,
    ) -> ChatResponse:
        return self.llm._validate_chat_with_tools_response(
            response, tools, allow_parallel_tool_calls=allow_parallel_tool_calls, **kwargs
        )

    def get_tool_calls_from_response(
        self, response: ChatResponse, error_on_no_tool_call: bool = True, **kwargs: Any
    ) -> Any:
        return self.llm.get_tool_calls_from_response(
            response, error_on_no_tool_call=error_on_no_tool_call, **kwargs
        )

    def chat(self, messages: Sequence[ChatMessage], **kwargs: Any) -> ChatResponse:
        sent, result, kwargs = self._send(messages, kwargs)
        response = self.llm.chat(sent, **kwargs)
        self._check(response, result)
        return response

    async def achat(self, messages: Sequence[ChatMessage], **kwargs: Any) -> ChatResponse:
        sent, result, kwargs = self._send(messages, kwargs)
        response = await self.llm.achat(sent, **kwargs)
        self._check(response, result)
        return response

    def stream_chat(self, messages: Sequence[ChatMessage], **kwargs: Any) -> ChatResponseGen:
        sent, result, kwargs = self._send(messages, kwargs)

        def gen() -> Generator[ChatResponse, None, None]:
            last = None
            for last in self.llm.stream_chat(sent, **kwargs):
                yield last
            if last is not None:
                self._check(last, result)

        return gen()

    async def astream_chat(
        self, messages: Sequence[ChatMessage], **kwargs: Any
    ) -> ChatResponseAsyncGen:
        sent, result, kwargs = self._send(messages, kwargs)
        stream = await self.llm.astream_chat(sent, **kwargs)

        async def gen() -> AsyncGenerator[ChatResponse, None]:
            last = None
            async for last in stream:
                yield last
            if last is not None:
                self._check(last, result)

        return gen()

    def complete(self, prompt: str, formatted: bool = False, **kwargs: Any) -> CompletionResponse:
        return self.llm.complete(prompt, formatted=formatted, **kwargs)

    async def acomplete(
        self, prompt: str, formatted: bool = False, **kwargs: Any
    ) -> CompletionResponse:
        return await self.llm.acomplete(prompt, formatted=formatted, **kwargs)

    def stream_complete(
        self, prompt: str, formatted: bool = False, **kwargs: Any
    ) -> CompletionResponseGen:
        return self.llm.stream_complete(prompt, formatted=formatted, **kwargs)

    async def astream_complete(
        self, prompt: str, formatted: bool = False, **kwargs: Any
    ) -> CompletionResponseAsyncGen:
        return await self.llm.astream_complete(prompt, formatted=formatted, **kwargs)


def _with_text(message: ChatMessage, text: str) -> ChatMessage:
    """A copy of ``message`` whose content is ``text`` (same role and kwargs)."""
    return ChatMessage(
        role=message.role, content=text, additional_kwargs=dict(message.additional_kwargs)
    )
