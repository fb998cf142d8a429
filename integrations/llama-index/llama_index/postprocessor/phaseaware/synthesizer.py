"""``PhaseAwareSynthesizer``: send the assembled prompt to the LLM exactly as planned.

The plan covers the whole conversation the LLM receives: the text-QA template's
fixed text, the LLM's ``system_prompt`` (and, for completion LLMs, its
``query_wrapper_prompt``), and the chunks as ``PhaseAwarePostprocessor``
arranged them. A chat LLM gets ``AssemblyResult.messages`` (one ``ChatMessage``
per message, text verbatim); a completion LLM gets ``AssemblyResult.prompt``
with ``formatted=True``. Nodes whose plan no longer matches (reordered or
filtered after the postprocessor, or planned for another conversation) are
planned again, with a warning. Where the response reports
``usage.prompt_tokens``, it is checked against the plan.
"""

from __future__ import annotations

import asyncio
import os
import warnings
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Literal

from llama_index.core.base.base_retriever import BaseRetriever
from llama_index.core.base.llms.types import ChatResponse, CompletionResponse
from llama_index.core.base.response.schema import RESPONSE_TYPE, Response
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
    PlanConfig,
    assemble_nodes,
    conversation_key,
)
from llama_index.postprocessor.phaseaware.postprocessor import PhaseAwarePostprocessor

from phaseaware.assembly import AssemblyOptions
from phaseaware.endpoints import EndpointRef, UsageCheck, check_prompt_tokens, usage_offsets
from phaseaware.endpoints import reported_prompt_tokens as raw_prompt_tokens
from phaseaware.errors import InputError, PhaseawareWarning
from phaseaware.profiles.model import Profile
from phaseaware.tokenizers.base import Tokenizer

__all__ = ["SENT_KEY", "PhaseAwareSynthesizer", "PlanSent", "phaseaware_query_engine"]

SENT_KEY = "phaseaware"  # response.metadata[SENT_KEY]: the PlanSent of that answer

OnMismatch = Literal["warn", "raise", "ignore"]


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
    ids = [n.node.node_id for n in nodes]
    if ids != list(assembly.get("chunk_ids", ())):
        return "nodes were reordered, added or removed after PhaseAwarePostprocessor"
    prompt = str(assembly["prompt"])
    for n in nodes:
        placement = n.node.metadata.get(PLACEMENT_KEY)
        if not isinstance(n.node, TextNode) or not isinstance(placement, Mapping):
            return "a node lost its placement report"
        span = prompt[int(placement["segment_char_start"]) : int(placement["char_end"])]
        if n.node.text != span:
            return f"the text of node {n.node.node_id!r} changed after PhaseAwarePostprocessor"
    return None


def reported_prompt_tokens(response: ChatResponse | CompletionResponse) -> int | None:
    """``usage.prompt_tokens`` of the raw response (object or dict), else of
    ``additional_kwargs``; ``None`` when the server reported none."""
    value = raw_prompt_tokens(response.raw)
    if value is not None:
        return value
    value = response.additional_kwargs.get("prompt_tokens")
    return value if isinstance(value, int) and not isinstance(value, bool) else None


class PhaseAwareSynthesizer(BaseSynthesizer):
    """A response synthesizer that sends phaseaware's verified prompt unchanged.

    ``tokenizer``, ``chat_format``, ``profile``, ``budget_tokens`` and
    ``options`` mean what they mean for :class:`PhaseAwarePostprocessor`;
    ``text_qa_template`` is the LlamaIndex prompt whose fixed text frames the
    chunks (default: LlamaIndex's text-QA prompt). ``on_mismatch`` decides what a
    ``usage.prompt_tokens`` that differs from the plan does (``warn``, ``raise``:
    ``PromptTokenDriftError``, ``ignore``); ``prompt_token_offset`` is the
    tokens the endpoint adds before the prompt (default:
    ``options.position_offset``). Each response's ``metadata["phaseaware"]`` is the
    :class:`PlanSent` of that call (``last_sent``: the latest call's).
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
        prompt_token_offset: int | None = None,
        endpoint: EndpointRef = None,
        callback_manager: CallbackManager | None = None,
        empty_response: str | None = None,
    ) -> None:
        super().__init__(llm=llm, callback_manager=callback_manager, empty_response=empty_response)
        self._config = PlanConfig.resolve(
            tokenizer=tokenizer,
            chat_format=chat_format,
            profile=profile,
            budget_tokens=budget_tokens,
            options=options,
            endpoint=endpoint,
        )
        record = self._config.endpoint
        if record is not None and prompt_token_offset is not None:
            known = record.offsets if record.stability == "varying" else (record.offset,)
            if (prompt_token_offset,) != known:
                raise InputError(
                    f"prompt_token_offset={prompt_token_offset} disagrees with the endpoint "
                    f"record for {record.model!r} at {record.base_url} (offsets "
                    f"{list(known)}, {record.stability}); pass only the endpoint record"
                )
        if is_chat_llm(self._llm) and chat_format == "none":
            raise InputError(
                "a chat LLM (is_chat_model=True) receives messages; pass the chat format the "
                "server renders them with (hf, chatml, deepseek-v4), or use a completion LLM"
            )
        if on_mismatch not in ("warn", "raise", "ignore"):
            raise InputError(f"on_mismatch must be warn, raise or ignore, got {on_mismatch!r}")
        self._on_mismatch: OnMismatch = on_mismatch
        self._offset = prompt_token_offset
        self._text_qa_template = text_qa_template
        self._messages = text_qa_conversation(text_qa_template, llm=self._llm)
        self.last_sent: PlanSent | None = None

    @property
    def conversation(self) -> list[dict[str, str]]:
        """The conversation the LLM receives, ``{context}`` and ``{question}`` unfilled."""
        return [dict(m) for m in self._messages]

    def postprocessor(self) -> PhaseAwarePostprocessor:
        """A postprocessor configured exactly as this synthesizer plans."""
        c = self._config
        return PhaseAwarePostprocessor(
            tokenizer=c.tokenizer,
            chat_format=c.chat_format,
            profile=c.profile,
            budget_tokens=c.budget_tokens,
            options=c.options,
            endpoint=c.endpoint,
            messages=self.conversation,
        )

    def _get_prompts(self) -> PromptDictType:
        return {"text_qa_template": self._text_qa_template} if self._text_qa_template else {}

    def _update_prompts(self, prompts: PromptDictType) -> None:
        if "text_qa_template" in prompts:
            self._text_qa_template = prompts["text_qa_template"]
            self._messages = text_qa_conversation(self._text_qa_template, llm=self._llm)

    def _plan(
        self, nodes: list[NodeWithScore], question: str
    ) -> tuple[PlanSent, list[NodeWithScore]]:
        key = conversation_key(self._config, self._messages, question)
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
            nodes, config=self._config, messages=self._messages, question=question
        )
        r = planned.result
        sent = PlanSent(r.messages, r.prompt, r.token_count, r.position_offset, True)
        return sent, list(planned.nodes)

    def _check(self, sent: PlanSent, response: ChatResponse | CompletionResponse) -> PlanSent:
        reported = reported_prompt_tokens(response)
        if reported is None:
            return sent
        offset, offsets = usage_offsets(self._config.options)
        if self._offset is not None:
            offset, offsets = self._offset, None
        check = check_prompt_tokens(
            planned_tokens=sent.token_count,
            reported_tokens=reported,
            offset=offset,
            offsets=offsets,
            on_mismatch=self._on_mismatch,
        )
        return PlanSent(
            sent.messages,
            sent.prompt,
            sent.token_count,
            sent.position_offset,
            sent.replanned,
            check,
        )

    def _call(self, sent: PlanSent) -> tuple[str, PlanSent]:
        if is_chat_llm(self._llm):
            chat = self._llm.chat(to_chat_messages(sent.messages))
            return chat.message.content or "", self._check(sent, chat)
        done = self._llm.complete(sent.prompt, formatted=True)
        return done.text, self._check(sent, done)

    async def _acall(self, sent: PlanSent) -> tuple[str, PlanSent]:
        if is_chat_llm(self._llm):
            chat = await self._llm.achat(to_chat_messages(sent.messages))
            return chat.message.content or "", self._check(sent, chat)
        done = await self._llm.acomplete(sent.prompt, formatted=True)
        return done.text, self._check(sent, done)

    def _answer(
        self, text: str, sent: PlanSent, nodes: list[NodeWithScore], extra: Sequence[NodeWithScore]
    ) -> RESPONSE_TYPE:
        self.last_sent = sent
        response = self._prepare_response_output(text, [*nodes, *extra])
        response.metadata = {**(response.metadata or {}), SENT_KEY: sent}
        return response

    def synthesize(
        self,
        query: QueryTextType,
        nodes: list[NodeWithScore],
        additional_source_nodes: Sequence[NodeWithScore] | None = None,
        **response_kwargs: Any,
    ) -> RESPONSE_TYPE:
        if not nodes:
            return Response(self._empty_response)
        bundle = QueryBundle(query_str=query) if isinstance(query, str) else query
        with self._callback_manager.event(
            CBEventType.SYNTHESIZE, payload={EventPayload.QUERY_STR: bundle.query_str}
        ) as event:
            sent, arranged = self._plan(list(nodes), bundle.query_str)
            text, sent = self._call(sent)
            response = self._answer(text, sent, arranged, additional_source_nodes or ())
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
            return Response(self._empty_response)
        bundle = QueryBundle(query_str=query) if isinstance(query, str) else query
        with self._callback_manager.event(
            CBEventType.SYNTHESIZE, payload={EventPayload.QUERY_STR: bundle.query_str}
        ) as event:
            sent, arranged = await asyncio.to_thread(self._plan, list(nodes), bundle.query_str)
            text, sent = await self._acall(sent)
            response = self._answer(text, sent, arranged, additional_source_nodes or ())
            event.on_end(payload={EventPayload.RESPONSE: response})
        return response

    def _text_nodes(self, text_chunks: Sequence[str]) -> list[NodeWithScore]:
        return [
            NodeWithScore(node=TextNode(text=t, id_=f"chunk-{i}"))
            for i, t in enumerate(text_chunks)
        ]

    def get_response(self, query_str: str, text_chunks: Sequence[str], **kwargs: Any) -> str:
        """Plan ``text_chunks`` (retrieval order) and answer; prefer :meth:`synthesize`."""
        sent, _ = self._plan(self._text_nodes(text_chunks), query_str)
        text, self.last_sent = self._call(sent)
        return text

    async def aget_response(self, query_str: str, text_chunks: Sequence[str], **kwargs: Any) -> str:
        sent, _ = self._plan(self._text_nodes(text_chunks), query_str)
        text, self.last_sent = await self._acall(sent)
        return text


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
) -> RetrieverQueryEngine:
    """``RetrieverQueryEngine`` with a ``PhaseAwarePostprocessor`` (last, after
    ``node_postprocessors``) and a ``PhaseAwareSynthesizer`` planning the same conversation;
    ``endpoint``: an endpoint record both use (see ``PhaseAwareSynthesizer``)."""
    synthesizer = PhaseAwareSynthesizer(
        llm=llm,
        tokenizer=tokenizer,
        chat_format=chat_format,
        profile=profile,
        budget_tokens=budget_tokens,
        options=options,
        text_qa_template=text_qa_template,
        on_mismatch=on_mismatch,
        endpoint=endpoint,
    )
    return RetrieverQueryEngine(
        retriever,
        response_synthesizer=synthesizer,
        node_postprocessors=[*node_postprocessors, synthesizer.postprocessor()],
    )
