"""``PhaseAwareSynthesizer``: send the assembled prompt to the LLM exactly as planned (the
whole conversation: template, system prompt, the arranged chunks; see docs/frameworks.md)."""

from __future__ import annotations

import asyncio
import os
from collections.abc import AsyncGenerator, Generator, Sequence
from dataclasses import replace
from typing import Any, Unpack

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
from llama_index.core.schema import NodeWithScore, TextNode
from llama_index.postprocessor.phaseaware.postprocessor import (
    PhaseAwarePostprocessor,
    assemble_nodes,
    is_chat_llm,
    node_records,
    text_qa_conversation,
    to_chat_messages,
)

from phaseaware import AssemblyResult, Profile, integrate
from phaseaware.integrate import PlanSent

__all__ = ["SENT_KEY", "PhaseAwareSynthesizer", "PlanSent", "phaseaware_query_engine"]

SENT_KEY = "phaseaware"  # response.metadata[SENT_KEY]: the PlanSent of that answer
Reply = ChatResponse | CompletionResponse
_FIX = (
    "put PhaseAwarePostprocessor last in node_postprocessors and build it with "
    "synthesizer.postprocessor() (or use phaseaware_query_engine)"
)


def _reported(reply: Reply, before: int | None = None) -> int | None:
    return integrate.reply_prompt_tokens(
        reply.raw, reply.additional_kwargs.get("prompt_tokens"), before
    )


def _text(reply: Reply) -> str:
    return (reply.message.content or "") if isinstance(reply, ChatResponse) else reply.text


def _chunk_nodes(text_chunks: Sequence[str]) -> list[NodeWithScore]:
    return [
        NodeWithScore(node=TextNode(text=t, id_=f"chunk-{i}")) for i, t in enumerate(text_chunks)
    ]


class PhaseAwareSynthesizer(BaseSynthesizer):
    """A response synthesizer that sends phaseaware's verified prompt unchanged.

    The target arguments as for :class:`PhaseAwarePostprocessor` (chat settings: stated on
    every chat call); ``text_qa_template``: the prompt framing the chunks (default:
    LlamaIndex's); ``on_mismatch``: what a usage mismatch does (``warn``, ``raise``,
    ``ignore``). ``response.metadata["phaseaware"]`` and ``last_sent``: the :class:`PlanSent`.
    """

    def __init__(
        self, *, tokenizer: str | integrate.Tokenizer, chat_format: str | integrate.ChatFormat,
        budget_tokens: int, profile: str | os.PathLike[str] | Profile | None = None,
        llm: LLM | None = None, text_qa_template: BasePromptTemplate | None = None,
        on_mismatch: integrate.OnMismatch = "warn", callback_manager: CallbackManager | None = None,
        empty_response: str | None = None, streaming: bool = False,
        **target: Unpack[integrate.TargetOptions],
    ) -> None:  # fmt: skip
        super().__init__(
            llm=llm, callback_manager=callback_manager, empty_response=empty_response,
            streaming=streaming,
        )  # fmt: skip
        self._target = integrate.target_of(
            {**target, "tokenizer": tokenizer, "chat_format": chat_format,
             "budget_tokens": budget_tokens, "profile": profile}
        )  # fmt: skip
        self._request = self._target.request_kwargs()  # chat calls state the planned settings
        if is_chat_llm(self._llm):
            chat_llm = "a chat LLM (is_chat_model=True) receives messages"
            integrate.require_chat(self._target, who=chat_llm)
        self._on_mismatch = integrate.check_on_mismatch(on_mismatch)
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
        """The plan the nodes carry, else a new one (with a warning when one was lost)."""
        node_records(nodes)  # None or ill-typed nodes and scores: InputError naming the index

        def replan() -> tuple[AssemblyResult, list[NodeWithScore]]:
            planned = assemble_nodes(
                nodes, target=self._target, messages=self._messages, question=question
            )
            return planned.result, list(planned.nodes)

        return integrate.plan_to_send(
            [n.node.metadata for n in nodes], target=self._target, messages=self._messages,
            question=question, ids=[n.node.node_id for n in nodes],
            texts=[n.node.text if isinstance(n.node, TextNode) else None for n in nodes],
            replan=replan, kept=nodes, who="PhaseAwareSynthesizer",
            planner="PhaseAwarePostprocessor", fix=_FIX, what="nodes",
        )  # fmt: skip

    def _check(self, sent: PlanSent, reply: Reply | None, reported: int | None) -> PlanSent:
        check = integrate.check_raw_usage(
            self._target, planned_tokens=sent.token_count, on_mismatch=self._on_mismatch,
            raw=reply.raw if reply is not None else None, reported_tokens=reported,
        )  # fmt: skip
        self.last_sent = replace(sent, check=check)
        return self.last_sent

    # one LLM call per synthesize: kind "" (whole), "a" (async), "stream_", "astream_"

    def _llm_call(self, kind: str, sent: PlanSent) -> Any:
        if is_chat_llm(self._llm):
            messages = to_chat_messages(sent.messages)
            return getattr(self._llm, f"{kind}chat")(messages, **self._request)
        return getattr(self._llm, f"{kind}complete")(sent.prompt, formatted=True)

    def _call(self, sent: PlanSent) -> tuple[str, PlanSent]:
        reply = self._llm_call("", sent)
        return _text(reply), self._check(sent, reply, _reported(reply))

    async def _acall(self, sent: PlanSent) -> tuple[str, PlanSent]:
        reply = await self._llm_call("a", sent)
        return _text(reply), self._check(sent, reply, _reported(reply))

    def _stream(self, sent: PlanSent, metadata: dict[str, Any]) -> Generator[str, None, None]:
        reported, last = None, None
        for last in self._llm_call("stream_", sent):
            reported = _reported(last, reported)
            yield last.delta or ""
        metadata[SENT_KEY] = self._check(sent, last, reported)

    async def _astream(self, sent: PlanSent, metadata: dict[str, Any]) -> AsyncGenerator[str, None]:
        reported, last = None, None
        async for last in await self._llm_call("astream_", sent):
            reported = _reported(last, reported)
            yield last.delta or ""
        metadata[SENT_KEY] = self._check(sent, last, reported)

    def _respond(
        self, event: Any, sent: PlanSent, nodes: list[NodeWithScore],
        called: tuple[str, PlanSent] | None, aio: bool = False,
    ) -> RESPONSE_TYPE:  # fmt: skip
        """The response (``called``: the answer and the checked plan; ``None``: a stream
        whose metadata gets the checked plan when it ends), reported to ``event``."""
        response: RESPONSE_TYPE
        if called is not None:
            response = self._prepare_response_output(called[0], nodes)
            response.metadata = {**(response.metadata or {}), SENT_KEY: called[1]}
        else:
            metadata: dict[str, Any] = {n.node.node_id: n.node.metadata for n in nodes}
            metadata[SENT_KEY] = sent  # replaced by the checked PlanSent when the stream ends
            if aio:
                response = AsyncStreamingResponse(self._astream(sent, metadata), nodes, metadata)
            else:
                response = StreamingResponse(self._stream(sent, metadata), nodes, metadata)
        event.on_end(payload={EventPayload.RESPONSE: response})
        return response

    def synthesize(
        self, query: QueryTextType, nodes: list[NodeWithScore],
        additional_source_nodes: Sequence[NodeWithScore] | None = None, **response_kwargs: Any,
    ) -> RESPONSE_TYPE:  # fmt: skip
        if not nodes:
            if self._streaming:
                return StreamingResponse(self._empty_response_generator())
            return Response(self._empty_response)
        question = query if isinstance(query, str) else query.query_str
        payload: dict[str, Any] = {EventPayload.QUERY_STR: question}
        with self._callback_manager.event(CBEventType.SYNTHESIZE, payload=payload) as event:
            sent, arranged = self._plan(list(nodes), question)
            called = None if self._streaming else self._call(sent)
            return self._respond(event, sent, [*arranged, *(additional_source_nodes or ())], called)

    async def asynthesize(
        self, query: QueryTextType, nodes: list[NodeWithScore],
        additional_source_nodes: Sequence[NodeWithScore] | None = None, **response_kwargs: Any,
    ) -> RESPONSE_TYPE:  # fmt: skip
        if not nodes:
            if self._streaming:
                return AsyncStreamingResponse(self._empty_response_agenerator())
            return Response(self._empty_response)
        question = query if isinstance(query, str) else query.query_str
        payload: dict[str, Any] = {EventPayload.QUERY_STR: question}
        with self._callback_manager.event(CBEventType.SYNTHESIZE, payload=payload) as event:
            sent, arranged = await asyncio.to_thread(self._plan, list(nodes), question)
            called = None if self._streaming else await self._acall(sent)
            extra = additional_source_nodes or ()
            return self._respond(event, sent, [*arranged, *extra], called, aio=True)

    def get_response(self, query_str: str, text_chunks: Sequence[str], **kwargs: Any) -> Any:
        """Plan ``text_chunks`` (retrieval order) and answer; prefer :meth:`synthesize`."""
        sent, _ = self._plan(_chunk_nodes(text_chunks), query_str)
        return self._stream(sent, {}) if self._streaming else self._call(sent)[0]

    async def aget_response(self, query_str: str, text_chunks: Sequence[str], **kwargs: Any) -> Any:
        sent, _ = self._plan(_chunk_nodes(text_chunks), query_str)
        return self._astream(sent, {}) if self._streaming else (await self._acall(sent))[0]


def phaseaware_query_engine(
    retriever: BaseRetriever, *, llm: LLM, text_qa_template: BasePromptTemplate | None = None,
    node_postprocessors: Sequence[BaseNodePostprocessor] = (),
    on_mismatch: integrate.OnMismatch = "warn", streaming: bool = False,
    **target: Unpack[integrate.TargetArgs],
) -> RetrieverQueryEngine:  # fmt: skip
    """``RetrieverQueryEngine`` with a ``PhaseAwareSynthesizer`` (the arguments as its) and
    its ``postprocessor()`` last, after ``node_postprocessors``."""
    synthesizer = PhaseAwareSynthesizer(
        llm=llm, text_qa_template=text_qa_template, on_mismatch=on_mismatch,
        streaming=streaming, **target,
    )  # fmt: skip
    postprocessors = [*node_postprocessors, synthesizer.postprocessor()]
    return RetrieverQueryEngine(
        retriever, response_synthesizer=synthesizer, node_postprocessors=postprocessors
    )
