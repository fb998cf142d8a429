"""Phase-aware tool results for LlamaIndex agents (``FunctionAgent``, ``AgentWorkflow``).

:class:`PhaseAwareAgentLLM` wraps the agent's function-calling LLM (e.g. ``OpenAILike``).
Before each chat call it aligns the newest tool results: each tool message after the
last assistant turn has its documents placed into it by :func:`phaseaware.assemble_append`
(through :func:`phaseaware.integrate.append_records`). The guarantees are the
LangChain middleware's: the conversation already sent keeps its bytes (checked on
the final prompt, so the server's prefix cache still hits), positions are absolute
in the whole conversation, and after each aligned call the response's
``usage.prompt_tokens`` is compared with the planned count (``check_usage``). Each
step costs the new tool result, not the conversation: ``assemble_append`` re-uses
the previous prompt's verified tokenization (its prefix cache).

Why wrap the LLM. LlamaIndex has no public hook before each model call, and a
tool wrapper cannot align: the positions of a tool result depend on everything the
conversation holds before it, which a tool never sees, and the agent adds the
tool's text to its history itself. The LLM, in contrast, receives the exact
message list the server will render, on every step of every ``FunctionAgent``
(alone or inside an ``AgentWorkflow``), streaming or not, so wrapping it is the one
place that sees the whole prefix and can keep it byte-stable. The agent keeps the
original tool messages in its scratchpad and memory; the wrapper remembers what it
sent for each tool call id and sends that again on later steps (``aligned``), so
earlier bytes never change. An agent subclass would have to re-implement
``take_step`` for each agent class. ``ReActAgent`` does not fit: it renders its
whole reasoning history (observations included) as text on every step, so there is
no stable tool message to align; it is refused for now (use ``FunctionAgent``).

Documents of a tool result: the nodes that :func:`retriever_tool` registered for
that text (score, id, ``metadata["evidence"]``), else its text split on
``document_separator`` (scoreless: retrieval order, the kit's one rule). Tool
schemas: no chat format renders them yet, so the wrapper is for servers that
write none into the prompt (``tool_schemas="not_rendered"``; the usage check
confirms it on every call), and refuses bound tools otherwise.
"""

from __future__ import annotations

import json
import threading
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
    AssemblyRequest,
    ChatFormat,
    ChatSettings,
    EndpointRef,
    SourceRecord,
    Tokenizer,
    append_records,
    check_on_mismatch,
    check_usage,
    placement_report,
    refuse_tools,
    reported_identity,
    reported_prompt_tokens,
    resolve_target,
)

__all__ = ["AGENT_REPORT_KEY", "NodeRegistry", "PhaseAwareAgentLLM", "retriever_tool"]

AGENT_REPORT_KEY = "phaseaware"


class NodeRegistry:
    """Tool output text -> the scored nodes it was made of (bounded, thread-safe)."""

    def __init__(self, max_entries: int = 256) -> None:
        self.max_entries = max_entries
        self._nodes: dict[str, list[NodeWithScore]] = {}
        self._lock = threading.Lock()

    def put(self, text: str, nodes: Sequence[NodeWithScore]) -> None:
        with self._lock:
            self._nodes.pop(text, None)
            self._nodes[text] = list(nodes)
            while len(self._nodes) > self.max_entries:
                self._nodes.pop(next(iter(self._nodes)))

    def get(self, text: str) -> list[NodeWithScore] | None:
        with self._lock:
            return self._nodes.get(text)


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
    """The agent's LLM with its newest tool results aligned (see the module docstring).

    ``llm``: the function-calling LLM that talks to the server. Arguments as the
    LangChain middleware: ``budget_tokens`` bounds the whole conversation;
    ``check_usage`` compares the response's ``usage.prompt_tokens`` with the plan
    after every aligned call (``"warn"``, ``"raise"`` or ``"ignore"``);
    ``message_template`` is the aligned message's content (``{context}`` once).
    ``last_report`` is the placement report of the newest alignment.
    """

    llm: FunctionCallingLLM = Field(description="the wrapped function-calling LLM")
    document_separator: str = Field(default="\n\n")
    message_template: str = Field(default="{context}")
    usage_check: str = Field(default="warn", description="on a usage mismatch")
    tool_schemas: str = Field(default="refuse")

    _target: Any = PrivateAttr()
    _registry: NodeRegistry = PrivateAttr()
    _aligned: dict[str, tuple[str, ChatMessage]] = PrivateAttr(default_factory=dict)
    _dicts: dict[int, tuple[ChatMessage, dict[str, Any]]] = PrivateAttr(default_factory=dict)
    _lock: Any = PrivateAttr(default_factory=threading.Lock)
    _last: AssemblyResult | None = PrivateAttr(default=None)

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
        check_usage: Literal["warn", "raise", "ignore"] = "warn",
        tool_schemas: Literal["refuse", "not_rendered"] = "refuse",
    ) -> None:
        if not isinstance(message_template, str) or message_template.count("{context}") != 1:
            raise InputError(
                f"message_template must hold {{context}} exactly once, got {message_template!r}"
            )
        if tool_schemas not in ("refuse", "not_rendered"):
            raise InputError(
                f"tool_schemas must be 'refuse' or 'not_rendered', got {tool_schemas!r}"
            )
        if not isinstance(document_separator, str) or not document_separator:
            raise InputError("document_separator must be a non-empty string")
        super().__init__(
            llm=llm,
            document_separator=document_separator,
            message_template=message_template,
            usage_check=check_on_mismatch(check_usage, name="check_usage"),
            tool_schemas=tool_schemas,
        )
        self._target = resolve_target(
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
        if not self._target.require_format().chat:
            raise InputError("an agent sends messages: pass its chat format (deepseek-v4, ...)")
        self._registry = registry if registry is not None else NodeRegistry()
        self._aligned = {}
        self._dicts = {}
        self._lock = threading.Lock()

    @classmethod
    def class_name(cls) -> str:
        return "PhaseAwareAgentLLM"

    @property
    def metadata(self) -> LLMMetadata:
        return self.llm.metadata

    # -- alignment --------------------------------------------------------------------------

    def _records(self, text: str) -> list[SourceRecord]:
        nodes = self._registry.get(text)
        if nodes is not None:
            return [
                SourceRecord(
                    text=n.node.get_content(),
                    score=n.score,
                    id=n.node.node_id,
                    evidence=n.node.metadata.get("evidence"),
                )
                for n in nodes
            ]
        return [SourceRecord(text=t) for t in text.split(self.document_separator) if t]

    def align(
        self, messages: Sequence[ChatMessage]
    ) -> tuple[list[ChatMessage], AssemblyResult | None]:
        """The messages to send (earlier aligned tool results as sent before, the newest
        ones aligned now) and the newest alignment (``None``: nothing new). Pure for the
        caller: its messages are never changed."""
        out: list[ChatMessage] = []
        result = None
        last_assistant = max(
            (i for i, m in enumerate(messages) if str(m.role.value) == "assistant"), default=-1
        )
        question = next((_text(m) for m in reversed(messages) if str(m.role.value) == "user"), "")
        for index, message in enumerate(messages):
            call_id = message.additional_kwargs.get("tool_call_id")
            if str(message.role.value) != "tool" or not isinstance(call_id, str):
                out.append(message)
                continue
            original = _text(message)
            with self._lock:
                known = self._aligned.get(call_id)
            if known is not None and known[0] == original:
                out.append(known[1])  # the message sent before, the same object each step
                continue
            if index < last_assistant:  # sent before, unaligned: keep its bytes
                out.append(message)
                continue
            aligned = append_records(
                self._records(original),
                target=self._target,
                sent=[self._dict(m) for m in out],
                new={"role": "tool", "content": self.message_template, "tool_call_id": call_id},
                question=question,
            )
            if aligned is None or aligned.messages is None:
                out.append(message)
                continue
            sent_now = _with_text(message, str(aligned.messages[-1]["content"]))
            with self._lock:
                self._aligned[call_id] = (original, sent_now)
            out.append(sent_now)
            result = aligned
            self._last = aligned
        return out, result

    def _dict(self, message: ChatMessage) -> dict[str, Any]:
        """``message_dict(message)``, kept per message object (agents resend the same ones)."""
        with self._lock:
            known = self._dicts.get(id(message))
            if (
                known is not None
                and known[0] is message
                and known[1]["content"] == _text(message)  # not edited in place since
                and len(known[1].get("tool_calls", ())) == len(_tool_calls(message))
            ):
                return known[1]
        converted = message_dict(message)
        with self._lock:
            if len(self._dicts) > 8192:
                self._dicts.clear()
            self._dicts[id(message)] = (message, converted)  # the message kept: ids stay unique
        return converted

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
            on_mismatch=self.usage_check,  # type: ignore[arg-type]
            served_model=served_model,
            system_fingerprint=fingerprint,
        )

    def reset(self) -> None:
        """Forget what was sent (a new conversation)."""
        with self._lock:
            self._aligned.clear()
            self._dicts.clear()
        self._last = None

    @property
    def last_report(self) -> dict[str, Any] | None:
        """The placement report of the newest alignment (built when read: ``to_dict`` walks
        the whole conversation), without the prompt; ``None`` before any."""
        last = self._last
        if last is None:
            return None
        report = placement_report(last, [None] * len(last.placements))
        report.pop("prompt", None)
        return report

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
        if self.tool_schemas == "refuse":
            refuse_tools(
                self._target,
                tools,
                fix="pass tool_schemas='not_rendered' to PhaseAwareAgentLLM if the server "
                "writes no tool schemas into the prompt (the usage check verifies it)",
            )
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
        sent, result = self.align(messages)
        response = self.llm.chat(sent, **self._kwargs(kwargs))
        self._check(response, result)
        return response

    async def achat(self, messages: Sequence[ChatMessage], **kwargs: Any) -> ChatResponse:
        sent, result = self.align(messages)
        response = await self.llm.achat(sent, **self._kwargs(kwargs))
        self._check(response, result)
        return response

    def stream_chat(self, messages: Sequence[ChatMessage], **kwargs: Any) -> ChatResponseGen:
        sent, result = self.align(messages)

        def gen() -> Generator[ChatResponse, None, None]:
            last = None
            for last in self.llm.stream_chat(sent, **self._kwargs(kwargs)):
                yield last
            if last is not None:
                self._check(last, result)

        return gen()

    async def astream_chat(
        self, messages: Sequence[ChatMessage], **kwargs: Any
    ) -> ChatResponseAsyncGen:
        sent, result = self.align(messages)
        stream = await self.llm.astream_chat(sent, **self._kwargs(kwargs))

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
