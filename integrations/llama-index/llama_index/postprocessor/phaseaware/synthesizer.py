"""``PhaseAwareSynthesizer``: send the assembled prompt to the LLM exactly as planned.

The plan covers the whole conversation the LLM receives: the text-QA template's
fixed text, the LLM's ``system_prompt`` (and, for completion LLMs, its
``query_wrapper_prompt``), and the chunks as ``PhaseAwarePostprocessor``
arranged them. A chat LLM gets ``AssemblyResult.messages`` (one ``ChatMessage``
per message, text verbatim); a completion LLM gets ``AssemblyResult.prompt``
with ``formatted=True``. Nodes whose plan no longer matches (reordered or
filtered after the postprocessor, or planned for another conversation) are
planned again, with a warning. Where the response reports
``usage.prompt_tokens``, it is checked against the plan (:mod:`phaseaware.integrate`).

``streaming=True``: ``synthesize`` returns a ``StreamingResponse`` and
``asynthesize`` an ``AsyncStreamingResponse`` (the LLM's ``stream_chat`` /
``stream_complete`` and their async forms); the usage check runs when the stream
ends, on the chunk that carries usage (an OpenAI-compatible server sends it with
``stream_options={"include_usage": True}``: ``OpenAILike(additional_kwargs=...)``).
``RetrieverQueryEngine.from_args(streaming=True)`` configures only a synthesizer it
builds itself: pass ``streaming=True`` here (``phaseaware_query_engine`` does).
"""

from __future__ import annotations

import asyncio
import os
import warnings
from collections.abc import AsyncGenerator, Generator, Mapping, Sequence
from dataclasses import dataclass, replace
from typing import Any

from llama_index.core.base.base_retriever import BaseRetriever
from llama_index.core.base.llms.types import ChatResponse, CompletionResponse
from llama_index.core.base.response.schema import (
    RESPONSE_TYPE,
    AsyncStreamingResponse,
    Response,
    StreamingResponse,
)
from llama_index.core.callbacks.base import CallbackManager
from llama_index.core.callbacks.schema import CBEventType, EventPayload
from llama_index.core.llms import LLM
from llama_index.core.postprocessor.types import BaseNodePostprocessor
from llama_index.core.prompts import BasePromptTemplate
from llama_index.core.prompts.mixin import PromptDictType
from llama_index.core.query_engine import RetrieverQueryEngine
from llama_index.core.response_synthesizers.base import BaseSynthesizer, QueryTextType
from llama_index.core.schema import NodeWithScore, QueryBundle, TextNode
from llama_index.postprocessor.phaseaware.conversation import (
    is_chat_llm,
    text_qa_conversation,
    to_chat_messages,
)
from llama_index.postprocessor.phaseaware.plan import (
    ASSEMBLY_KEY,
    PLACEMENT_KEY,
    assemble_nodes,
    node_records,
)
from llama_index.postprocessor.phaseaware.postprocessor import PhaseAwarePostprocessor

from phaseaware import AssemblyOptions, Profile
from phaseaware.errors import InputError, PhaseawareWarning
from phaseaware.integrate import (
    AssemblyRequest,
    ChatSettings,
    EndpointRef,
    OnMismatch,
    Tokenizer,
    UsageCheck,
    check_on_mismatch,
    check_usage,
    reported_identity,
    resolve_target,
    stale_reason,
)
from phaseaware.integrate import reported_prompt_tokens as raw_prompt_tokens

__all__ = ["SENT_KEY", "PhaseAwareSynthesizer", "PlanSent", "phaseaware_query_engine"]

SENT_KEY = "phaseaware"  # response.metadata[SENT_KEY]: the PlanSent of that answer
Reply = ChatResponse | CompletionResponse


@dataclass(frozen=True)
class PlanSent:
    """What one synthesize call sent and what the server counted (``check`` None: no usage)."""

    messages: tuple[dict[str, str], ...] | None
    prompt: str
    token_count: int
    position_offset: int
    replanned: bool
    check: UsageCheck | None = None


def _stale_reason(nodes: Sequence[NodeWithScore], key: str) -> str | None:
    """Why ``nodes`` do not carry one intact plan for conversation ``key`` (None: intact)."""
    assembly = nodes[0].node.metadata.get(ASSEMBLY_KEY)
    if not isinstance(assembly, Mapping):
        return "the nodes carry no phaseaware plan"
    if assembly.get("conversation_key") != key:
        return "the nodes were planned for another conversation, question or configuration"
    if not all(isinstance(n.node.metadata.get(PLACEMENT_KEY), Mapping) for n in nodes):
        return "a node lost its placement report"
    texts = [n.node.text if isinstance(n.node, TextNode) else None for n in nodes]
    reason = stale_reason(assembly, ids=[n.node.node_id for n in nodes], texts=texts)
    return None if reason is None else f"{reason} (by PhaseAwarePostprocessor)"


def reported_prompt_tokens(response: Reply) -> int | None:
    """``usage.prompt_tokens`` of the raw response (object or dict), else of
    ``additional_kwargs``; ``None`` when the server reported none."""
    value = raw_prompt_tokens(response.raw)
    if value is not None:
        return value
    value = response.additional_kwargs.get("prompt_tokens")
    return value if isinstance(value, int) and not isinstance(value, bool) else None


def _text(reply: Reply) -> str:
    return (reply.message.content or "") if isinstance(reply, ChatResponse) else reply.text


def _latest(reply: Reply, before: int | None) -> int | None:
    """The prompt token count a stream has reported so far (its usage chunk comes last)."""
    value = reported_prompt_tokens(reply)
    return value if value is not None else before


def _delta(reply: Reply) -> str:
    return reply.delta or ""


class PhaseAwareSynthesizer(BaseSynthesizer):
    """A response synthesizer that sends phaseaware's verified prompt unchanged.

    ``tokenizer``, ``chat_format``, ``profile``, ``budget_tokens`` and
    ``options`` mean what they mean for :class:`PhaseAwarePostprocessor`;
    ``text_qa_template`` is the LlamaIndex prompt whose fixed text frames the
    chunks (default: LlamaIndex's text-QA prompt). ``on_mismatch`` decides what a
    ``usage.prompt_tokens`` that differs from the plan does (``warn``, ``raise``:
    ``PromptTokenDriftError``, ``ignore``); ``position_offset`` is the
    tokens the endpoint adds before the prompt (planned with, and expected by the check). ``streaming``: see the module docstring. Each
    response's ``metadata["phaseaware"]`` is the :class:`PlanSent` of that call
    (``last_sent``: the latest call's; a stream's once it has ended).
    ``settings`` / ``thinking``: the chat settings the plan is made with; every chat
    call states them (``extra_body={"chat_template_kwargs": ...}``, which ``OpenAILike``
    sends; an ``extra_body`` in the LLM's ``additional_kwargs`` replaces it).
    ``state_settings=False`` states nothing and plans with the endpoint record's
    ``server_default``. A response whose ``model``/``system_fingerprint`` differs
    from the endpoint record's warns (the served checkpoint changed).
    """

    def __init__(
        self,
        *,
        tokenizer: str | Tokenizer,
        chat_format: str,
        budget_tokens: int,
        profile: str | os.PathLike[str] | Profile | None = None,
        options: AssemblyOptions | Mapping[str, Any] | None = None,
        llm: LLM | None = None,
        text_qa_template: BasePromptTemplate | None = None,
        on_mismatch: OnMismatch = "warn",
        position_offset: int | None = None,
        endpoint: EndpointRef = None,
        callback_manager: CallbackManager | None = None,
        empty_response: str | None = None,
        streaming: bool = False,
        thinking: bool = False,
        settings: ChatSettings | Mapping[str, Any] | None = None,
        state_settings: bool = True,
    ) -> None:
        super().__init__(
            llm=llm, callback_manager=callback_manager, empty_response=empty_response,
            streaming=streaming,
        )  # fmt: skip
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
        # chat calls state the settings the plan was made with (completions render nothing)
        self._request = self._target.request_kwargs()
        if is_chat_llm(self._llm) and not self._target.require_format().chat:
            raise InputError(
                "a chat LLM (is_chat_model=True) receives messages; pass the chat format the "
                "server renders them with (hf, chatml, deepseek-v4), or use a completion LLM"
            )
        self._on_mismatch = check_on_mismatch(on_mismatch)
        self._text_qa_template = text_qa_template
        self._messages = text_qa_conversation(text_qa_template, llm=self._llm)
        self.last_sent: PlanSent | None = None

    @property
    def conversation(self) -> list[dict[str, str]]:
        """The conversation the LLM receives, ``{context}`` and ``{question}`` unfilled."""
        return [dict(m) for m in self._messages]

    def postprocessor(self) -> PhaseAwarePostprocessor:
        """A postprocessor configured exactly as this synthesizer plans."""
        t = self._target
        return PhaseAwarePostprocessor(
            tokenizer=t.tokenizer, chat_format=t.chat_format, profile=t.profile,
            budget_tokens=t.budget_tokens, options=t.options, endpoint=t.endpoint,
            messages=self.conversation,
        )  # fmt: skip

    def _get_prompts(self) -> PromptDictType:
        return {"text_qa_template": self._text_qa_template} if self._text_qa_template else {}

    def _update_prompts(self, prompts: PromptDictType) -> None:
        if "text_qa_template" in prompts:
            self._text_qa_template = prompts["text_qa_template"]
            self._messages = text_qa_conversation(self._text_qa_template, llm=self._llm)

    def _plan(
        self, nodes: list[NodeWithScore], question: str
    ) -> tuple[PlanSent, list[NodeWithScore]]:
        node_records(nodes)  # None or ill-typed nodes and scores: InputError naming the index
        key = self._target.plan_key(self._messages, question)
        reason = _stale_reason(nodes, key)
        if reason is None:
            a = nodes[0].node.metadata[ASSEMBLY_KEY]
            messages = tuple(dict(m) for m in a["messages"]) if a["messages"] else None
            sent = PlanSent(messages, a["prompt"], a["token_count"], a["position_offset"], False)
            return sent, nodes
        if any(ASSEMBLY_KEY in n.node.metadata for n in nodes):
            warnings.warn(
                f"PhaseAwareSynthesizer planned the nodes again: {reason}; put "
                "PhaseAwarePostprocessor last in node_postprocessors and build it with "
                "synthesizer.postprocessor() (or use phaseaware_query_engine)",
                PhaseawareWarning,
                stacklevel=3,
            )
        planned = assemble_nodes(
            nodes, target=self._target, messages=self._messages, question=question
        )
        r = planned.result
        sent = PlanSent(r.messages, r.prompt, r.token_count, r.position_offset, True)
        return sent, list(planned.nodes)

    def _check(self, sent: PlanSent, reported: int | None, reply: Reply | None) -> PlanSent:
        served_model, fingerprint = reported_identity(reply.raw if reply is not None else None)
        check = check_usage(
            self._target, planned_tokens=sent.token_count, reported_tokens=reported,
            on_mismatch=self._on_mismatch, served_model=served_model,
            system_fingerprint=fingerprint,
        )  # fmt: skip
        self.last_sent = replace(sent, check=check)
        return self.last_sent

    # -- one LLM call per synthesize: whole, streamed, async ---------------------------

    def _call(self, sent: PlanSent) -> tuple[str, PlanSent]:
        if is_chat_llm(self._llm):
            reply: Reply = self._llm.chat(to_chat_messages(sent.messages), **self._request)
        else:
            reply = self._llm.complete(sent.prompt, formatted=True)
        return _text(reply), self._check(sent, reported_prompt_tokens(reply), reply)

    async def _acall(self, sent: PlanSent) -> tuple[str, PlanSent]:
        if is_chat_llm(self._llm):
            reply: Reply = await self._llm.achat(to_chat_messages(sent.messages), **self._request)
        else:
            reply = await self._llm.acomplete(sent.prompt, formatted=True)
        return _text(reply), self._check(sent, reported_prompt_tokens(reply), reply)

    def _stream(self, sent: PlanSent, metadata: dict[str, Any]) -> Generator[str, None, None]:
        if is_chat_llm(self._llm):
            replies: Any = self._llm.stream_chat(to_chat_messages(sent.messages), **self._request)
        else:
            replies = self._llm.stream_complete(sent.prompt, formatted=True)
        reported, last = None, None
        for last in replies:
            reported = _latest(last, reported)
            yield _delta(last)
        metadata[SENT_KEY] = self._check(sent, reported, last)

    async def _astream(self, sent: PlanSent, metadata: dict[str, Any]) -> AsyncGenerator[str, None]:
        if is_chat_llm(self._llm):
            replies: Any = await self._llm.astream_chat(
                to_chat_messages(sent.messages), **self._request
            )
        else:
            replies = await self._llm.astream_complete(sent.prompt, formatted=True)
        reported, last = None, None
        async for last in replies:
            reported = _latest(last, reported)
            yield _delta(last)
        metadata[SENT_KEY] = self._check(sent, reported, last)

    def _answer(
        self, text: Any, sent: PlanSent, nodes: list[NodeWithScore], extra: Sequence[NodeWithScore]
    ) -> RESPONSE_TYPE:
        response = self._prepare_response_output(text, [*nodes, *extra])
        response.metadata = {**(response.metadata or {}), SENT_KEY: sent}
        return response

    def _streamed(
        self, sent: PlanSent, nodes: list[NodeWithScore], extra: Sequence[NodeWithScore], aio: bool
    ) -> RESPONSE_TYPE:
        metadata: dict[str, Any] = {n.node.node_id: n.node.metadata for n in [*nodes, *extra]}
        metadata[SENT_KEY] = sent  # replaced by the checked PlanSent when the stream ends
        if aio:
            return AsyncStreamingResponse(self._astream(sent, metadata), [*nodes, *extra], metadata)
        return StreamingResponse(self._stream(sent, metadata), [*nodes, *extra], metadata)

    def _empty(self) -> RESPONSE_TYPE:
        return Response(self._empty_response)

    def synthesize(
        self,
        query: QueryTextType,
        nodes: list[NodeWithScore],
        additional_source_nodes: Sequence[NodeWithScore] | None = None,
        **response_kwargs: Any,
    ) -> RESPONSE_TYPE:
        if not nodes:
            if self._streaming:
                return StreamingResponse(self._empty_response_generator())
            return self._empty()
        bundle = QueryBundle(query_str=query) if isinstance(query, str) else query
        with self._callback_manager.event(
            CBEventType.SYNTHESIZE, payload={EventPayload.QUERY_STR: bundle.query_str}
        ) as event:
            sent, arranged = self._plan(list(nodes), bundle.query_str)
            extra = additional_source_nodes or ()
            if self._streaming:
                response = self._streamed(sent, arranged, extra, aio=False)
            else:
                text, sent = self._call(sent)
                response = self._answer(text, sent, arranged, extra)
            event.on_end(payload={EventPayload.RESPONSE: response})
        return response

    async def asynthesize(
        self,
        query: QueryTextType,
        nodes: list[NodeWithScore],
        additional_source_nodes: Sequence[NodeWithScore] | None = None,
        **response_kwargs: Any,
    ) -> RESPONSE_TYPE:
        if not nodes:
            if self._streaming:
                return AsyncStreamingResponse(self._empty_response_agenerator())
            return self._empty()
        bundle = QueryBundle(query_str=query) if isinstance(query, str) else query
        with self._callback_manager.event(
            CBEventType.SYNTHESIZE, payload={EventPayload.QUERY_STR: bundle.query_str}
        ) as event:
            sent, arranged = await asyncio.to_thread(self._plan, list(nodes), bundle.query_str)
            extra = additional_source_nodes or ()
            if self._streaming:
                response = self._streamed(sent, arranged, extra, aio=True)
            else:
                text, sent = await self._acall(sent)
                response = self._answer(text, sent, arranged, extra)
            event.on_end(payload={EventPayload.RESPONSE: response})
        return response

    def _text_nodes(self, text_chunks: Sequence[str]) -> list[NodeWithScore]:
        return [
            NodeWithScore(node=TextNode(text=t, id_=f"chunk-{i}"))
            for i, t in enumerate(text_chunks)
        ]

    def get_response(self, query_str: str, text_chunks: Sequence[str], **kwargs: Any) -> Any:
        """Plan ``text_chunks`` (retrieval order) and answer; prefer :meth:`synthesize`."""
        sent, _ = self._plan(self._text_nodes(text_chunks), query_str)
        if self._streaming:
            return self._stream(sent, {})
        return self._call(sent)[0]

    async def aget_response(self, query_str: str, text_chunks: Sequence[str], **kwargs: Any) -> Any:
        sent, _ = self._plan(self._text_nodes(text_chunks), query_str)
        if self._streaming:
            return self._astream(sent, {})
        return (await self._acall(sent))[0]


def phaseaware_query_engine(
    retriever: BaseRetriever,
    *,
    llm: LLM,
    tokenizer: str | Tokenizer,
    chat_format: str,
    profile: str | os.PathLike[str] | Profile | None,
    budget_tokens: int,
    options: AssemblyOptions | Mapping[str, Any] | None = None,
    text_qa_template: BasePromptTemplate | None = None,
    node_postprocessors: Sequence[BaseNodePostprocessor] = (),
    on_mismatch: OnMismatch = "warn",
    endpoint: EndpointRef = None,
    streaming: bool = False,
    thinking: bool = False,
    settings: ChatSettings | Mapping[str, Any] | None = None,
    state_settings: bool = True,
) -> RetrieverQueryEngine:
    """``RetrieverQueryEngine`` with a ``PhaseAwarePostprocessor`` (last, after
    ``node_postprocessors``) and a ``PhaseAwareSynthesizer`` planning the same conversation;
    ``endpoint``: an endpoint record both use; ``streaming``: stream the answer;
    ``thinking`` / ``settings`` / ``state_settings``: the chat settings, as for the
    synthesizer (stated on its LLM calls)."""
    synthesizer = PhaseAwareSynthesizer(
        llm=llm, tokenizer=tokenizer, chat_format=chat_format, profile=profile,
        budget_tokens=budget_tokens, options=options, text_qa_template=text_qa_template,
        on_mismatch=on_mismatch, endpoint=endpoint, streaming=streaming, thinking=thinking,
        settings=settings, state_settings=state_settings,
    )  # fmt: skip
    return RetrieverQueryEngine(
        retriever,
        response_synthesizer=synthesizer,
        node_postprocessors=[*node_postprocessors, synthesizer.postprocessor()],
    )
