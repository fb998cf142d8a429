"""Retrieved nodes arranged as ``phaseaware.assemble`` plans, and the conversation planned.

``PhaseAwarePostprocessor`` orders and pads nodes into :class:`PhaseAwareNode` objects
carrying their placements (use it with ``PhaseAwareSynthesizer``); ``PhaseAwareReorder``
orders them alone. See docs/frameworks.md.
"""

from __future__ import annotations

import asyncio
import copy
import warnings
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from llama_index.core.base.llms.types import ChatMessage, MessageRole
from llama_index.core.bridge.pydantic import Field, PrivateAttr
from llama_index.core.llms import LLM
from llama_index.core.postprocessor.types import BaseNodePostprocessor
from llama_index.core.prompts import BasePromptTemplate
from llama_index.core.prompts.chat_prompts import CHAT_TEXT_QA_PROMPT
from llama_index.core.prompts.default_prompts import DEFAULT_TEXT_QA_PROMPT
from llama_index.core.schema import BaseNode, MetadataMode, NodeWithScore, QueryBundle, TextNode

from phaseaware import AssemblyResult, integrate
from phaseaware.errors import InputError, PhaseawareWarning

__all__ = [
    "ASSEMBLY_KEY",
    "PLACEMENT_KEY",
    "PhaseAwareNode",
    "PhaseAwarePostprocessor",
    "PhaseAwareReorder",
    "Planned",
    "RepackWarning",
    "text_qa_conversation",
]

PLACEMENT_KEY = integrate.PLACEMENT_KEY  # metadata: where this chunk landed (its report entry)
ASSEMBLY_KEY = integrate.ASSEMBLY_KEY  # metadata: the whole plan (one dict shared per call)
_CARRIED = integrate.CARRIED_KEYS

REPACK_WARNING = (
    "nodes arranged by PhaseAwarePostprocessor are being read for a response mode that "
    "repacks text (compact, tree_summarize, refine, accumulate, simple_summarize strip, join "
    "and re-split chunks), so the reported placements will not reach the model; pass "
    "response_synthesizer=PhaseAwareSynthesizer(...) to RetrieverQueryEngine, or build the "
    "engine with phaseaware_query_engine(...)"
)


class RepackWarning(PhaseawareWarning):
    """Arranged nodes went to a synthesizer that changes their text."""


class PhaseAwareNode(TextNode):
    """A text node whose ``text`` is one rendered segment (pad included) of a plan; it warns
    (:class:`RepackWarning`) when read for the LLM (``MetadataMode.LLM``), as only the
    built-in response modes, which repack text, read it."""

    @classmethod
    def class_name(cls) -> str:
        return "PhaseAwareNode"

    @classmethod
    def arranged(
        cls, original: BaseNode, *, text: str, placement: Mapping[str, Any],
        assembly: Mapping[str, Any],
    ) -> PhaseAwareNode:  # fmt: skip
        """A new node for ``original`` (same id, relationships, metadata deep-copied);
        ``text`` is what the LLM sees, so all metadata is hidden from the LLM view."""
        metadata = integrate.carried_metadata(
            original.metadata, placement=placement, report=assembly
        )
        embed_hidden = [k for k in original.excluded_embed_metadata_keys if k not in _CARRIED]
        fields: dict[str, Any] = {  # field names (pydantic aliases differ: extra_info, ...)
            "id_": original.node_id,
            "text": text,
            "metadata": metadata,
            "excluded_llm_metadata_keys": list(metadata),
            "excluded_embed_metadata_keys": [*embed_hidden, *_CARRIED],
            "relationships": copy.deepcopy(original.relationships),
            "metadata_template": original.metadata_template,
            "metadata_separator": original.metadata_separator,
        }
        return cls(**fields)

    def get_content(self, metadata_mode: MetadataMode = MetadataMode.NONE) -> str:
        if metadata_mode == MetadataMode.LLM:
            warnings.warn(REPACK_WARNING, RepackWarning, stacklevel=2)
        return super().get_content(metadata_mode=metadata_mode)


def node_records(nodes: object) -> list[integrate.SourceRecord]:
    """One record per node (what LlamaIndex shows the LLM: its metadata header included;
    an arranged node's text without the pad), score, id; ``InputError`` for a non-node."""
    if isinstance(nodes, str | bytes) or not isinstance(nodes, Sequence):
        raise InputError(f"nodes must be a list of NodeWithScore, got {type(nodes).__name__}")
    records = []
    for index, n in enumerate(nodes):
        if not isinstance(n, NodeWithScore) or not isinstance(n.node, BaseNode):
            raise InputError(
                f"nodes[{index}] is a {type(n).__name__}; pass NodeWithScore objects (a "
                "retriever's output)"
            )
        node = n.node
        text = (
            integrate.carried_text(node.text, node.metadata) if isinstance(node, TextNode) else None
        )
        if text is None:
            text = node.get_content(metadata_mode=MetadataMode.LLM)
        records.append(integrate.SourceRecord(text=text, score=n.score, id=node.node_id))
    return records


@dataclass(frozen=True)
class Planned:
    """One assemble call over nodes: the result and the new nodes, in context order."""

    result: AssemblyResult
    nodes: tuple[NodeWithScore, ...]
    conversation_key: str


def assemble_nodes(
    nodes: Sequence[NodeWithScore], *, target: integrate.Target,
    messages: Sequence[Mapping[str, Any]], question: str,
) -> Planned:  # fmt: skip
    """Assemble ``nodes`` into ``messages`` (one ``{context}``): new nodes in context order,
    each carrying :data:`PLACEMENT_KEY` (its report entry) and :data:`ASSEMBLY_KEY` (the
    whole report plus ``conversation_key``; one dict shared per call)."""
    records = node_records(nodes)
    plan = integrate.assemble_carried(
        records, target=target, messages=messages, question=question, what="nodes"
    )
    out = []
    for placed in plan.placed:
        original = nodes[placed.index]
        node = PhaseAwareNode.arranged(
            original.node, text=placed.segment.text, placement=placed.placement,
            assembly=plan.report,
        )  # fmt: skip
        out.append(NodeWithScore(node=node, score=original.score))
    return Planned(result=plan.result, nodes=tuple(out), conversation_key=plan.key)


def is_chat_llm(llm: LLM | None) -> bool:
    """Whether ``llm`` is called with messages (``chat``) rather than a string (``complete``)."""
    return True if llm is None else bool(llm.metadata.is_chat_model)


def _contents(
    template: BasePromptTemplate, llm: LLM | None, context: str, query: str
) -> list[dict[str, str]]:
    """As ``LLM.predict`` formats ``template``: a chat LLM's messages (through its
    ``output_parser``, its ``system_prompt`` first); a completion LLM's one string
    (``system_prompt + "\\n\\n" + text`` in its ``query_wrapper_prompt``)."""
    if is_chat_llm(llm):
        messages = template.format_messages(llm=llm, context_str=context, query_str=query)
        if llm is not None and llm.output_parser is not None:
            messages = llm.output_parser.format_messages(messages)
        if llm is not None and llm.system_prompt:
            messages = [ChatMessage(role=MessageRole.SYSTEM, content=llm.system_prompt), *messages]
        out = []
        for i, message in enumerate(messages):
            if not isinstance(message.content, str):
                raise InputError(f"text QA template message {i} holds no text; use text messages")
            out.append({"role": str(message.role.value), "content": message.content})
        return out
    text = template.format(llm=llm, context_str=context, query_str=query)
    if llm is not None and llm.system_prompt:
        text = llm.system_prompt + "\n\n" + text
    if llm is not None and llm.query_wrapper_prompt is not None:
        text = llm.query_wrapper_prompt.format(query_str=text)
    return [{"role": "user", "content": text}]


def text_qa_conversation(
    template: BasePromptTemplate | None = None, *, llm: LLM | None = None
) -> list[dict[str, str]]:
    """The messages ``llm`` would get from ``template`` (default: LlamaIndex's text QA
    prompt, as ``DEFAULT_TEXT_QA_PROMPT_SEL`` selects), ``{context}`` and ``{question}``
    unfilled; ``InputError`` when its own text holds ``{context}``/``{question}``."""
    if template is None:
        template = CHAT_TEXT_QA_PROMPT if is_chat_llm(llm) else DEFAULT_TEXT_QA_PROMPT
    chosen = template
    return integrate.tagged_conversation(
        lambda context, query: _contents(chosen, llm, context, query)
    )


def to_chat_messages(messages: Any) -> list[ChatMessage]:
    """phaseaware's OpenAI-style message dicts as LlamaIndex ``ChatMessage`` objects."""
    return [ChatMessage(role=MessageRole(m["role"]), content=m["content"]) for m in messages]


class PhaseAwarePostprocessor(BaseNodePostprocessor):
    """Arrange nodes so that their evidence key tokens land on reliable residues.

    Returns new nodes in context order: text is each chunk's rendered segment (pad
    included); metadata ``phaseaware_placement`` (its report entry) and
    ``phaseaware_assembly`` (the plan), hidden from LLM and embedding views. Chunks the
    budget cannot hold are left out; the caller's nodes are never changed.
    """

    tokenizer: Any = Field(description="a phaseaware tokenizer spec or Tokenizer")
    chat_format: Any = Field(description="how the server renders messages: hf, chatml, ...")
    profile: Any = Field(None, description="a model name, profile path, Profile or None")
    budget_tokens: int = Field(description="most tokens of the whole prompt")
    options: Any = Field(None, description="AssemblyOptions or a dict of its fields")
    endpoint: Any = Field(None, description="a probe-endpoint record: its offset (set)")
    messages: list[dict[str, str]] | None = Field(
        None, description="the synthesizer's conversation ({context}, {question}); default: "
        "LlamaIndex's chat text-QA prompt",
    )  # fmt: skip

    _target: integrate.Target = PrivateAttr()
    _messages: list[dict[str, str]] = PrivateAttr()

    def __init__(self, **data: Any) -> None:
        super().__init__(**data)
        self._target = integrate.target_of(
            {"tokenizer": self.tokenizer, "chat_format": self.chat_format,
             "profile": self.profile, "budget_tokens": self.budget_tokens,
             "options": self.options, "endpoint": self.endpoint}
        )  # fmt: skip
        messages = self.messages
        self._messages = [dict(m) for m in messages] if messages else text_qa_conversation()

    @classmethod
    def class_name(cls) -> str:
        return "PhaseAwarePostprocessor"

    @property
    def target(self) -> integrate.Target:
        return self._target

    @property
    def conversation(self) -> list[dict[str, str]]:
        """The conversation nodes are assembled into (a copy)."""
        return [dict(m) for m in self._messages]

    def plan(
        self, nodes: list[NodeWithScore], query_bundle: QueryBundle | None = None
    ) -> Planned | None:
        """The whole plan for ``nodes`` (``None`` for no nodes); a missing query is ``""``."""
        if not nodes:
            return None
        question = query_bundle.query_str if query_bundle is not None else ""
        return assemble_nodes(
            nodes, target=self._target, messages=self._messages, question=question
        )

    def _postprocess_nodes(
        self, nodes: list[NodeWithScore], query_bundle: QueryBundle | None = None
    ) -> list[NodeWithScore]:
        planned = self.plan(nodes, query_bundle)
        return list(planned.nodes) if planned is not None else []

    async def _apostprocess_nodes(
        self, nodes: list[NodeWithScore], query_bundle: QueryBundle | None = None
    ) -> list[NodeWithScore]:
        planned = await asyncio.to_thread(self.plan, list(nodes), query_bundle)
        return list(planned.nodes) if planned is not None else []


class PhaseAwareReorder(BaseNodePostprocessor):
    """A drop-in for ``LongContextReorder``: the same nodes, none changed, in the kit's
    order (lost in the middle without a profile, phase-aware with one; unscored nodes
    after scored ones, in retrieval order); copies of one node id (a hybrid retriever's)
    merged into the best-scored one."""

    profile: Any = Field(
        default=None, description="a model name, profile path or Profile; None: lost in the middle"
    )

    _profile: Any = PrivateAttr(default=None)

    def __init__(self, **data: Any) -> None:
        super().__init__(**data)
        self._profile = integrate.reorder_profile(
            self.profile
        )  # a bad name fails here, not per call

    @classmethod
    def class_name(cls) -> str:
        return "PhaseAwareReorder"

    def _postprocess_nodes(
        self, nodes: list[NodeWithScore], query_bundle: QueryBundle | None = None
    ) -> list[NodeWithScore]:
        order = integrate.reorder_records(node_records(nodes), profile=self._profile, what="nodes")
        return [nodes[i] for i in order]

    async def _apostprocess_nodes(
        self, nodes: list[NodeWithScore], query_bundle: QueryBundle | None = None
    ) -> list[NodeWithScore]:
        # on the event loop itself: ordering is arithmetic over the scores, no tokenizer
        return self._postprocess_nodes(nodes, query_bundle)
