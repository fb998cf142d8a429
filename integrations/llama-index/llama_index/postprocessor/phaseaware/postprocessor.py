"""``PhaseAwarePostprocessor``: order and pad retrieved nodes as ``phaseaware.assemble`` plans.

Use it with :class:`~llama_index.postprocessor.phaseaware.synthesizer.PhaseAwareSynthesizer`
(or build both with ``phaseaware_query_engine``): every built-in response mode
repacks node text and would move the placements (the nodes warn when that happens).
"""

from __future__ import annotations

import asyncio
from typing import Any

from llama_index.core.bridge.pydantic import Field, PrivateAttr
from llama_index.core.postprocessor.types import BaseNodePostprocessor
from llama_index.core.schema import NodeWithScore, QueryBundle
from llama_index.postprocessor.phaseaware.conversation import default_text_qa_messages
from llama_index.postprocessor.phaseaware.plan import Planned, assemble_nodes

from phaseaware.integrate import AssemblyRequest, Target, resolve_target

__all__ = ["PhaseAwarePostprocessor"]


class PhaseAwarePostprocessor(BaseNodePostprocessor):
    """Arrange nodes so that their evidence key tokens land on reliable residues.

    Returns new nodes, in context order, whose text is each chunk's rendered
    segment (filler pad included) and whose metadata holds the placement report
    under ``phaseaware_placement`` and the whole plan under
    ``phaseaware_assembly`` (both hidden from the LLM and embedding views).
    Chunks that do not fit the budget are left out. The caller's nodes are
    never changed.
    """

    tokenizer: Any = Field(
        description=(
            "The model's tokenizer: a phaseaware spec ('reference', 'deepseek-v4', "
            "'tiktoken:o200k_base', 'hf:/path/to/model') or a phaseaware Tokenizer."
        )
    )
    chat_format: Any = Field(
        description=(
            "How the server renders the messages: 'hf' (the tokenizer's own chat template), "
            "'chatml', 'deepseek-v4', 'none' (a plain completion), or a phaseaware ChatFormat."
        )
    )
    profile: Any = Field(
        default=None,
        description=(
            "The model's residue profile: a model name, a profile .json path or a "
            "phaseaware Profile; None orders by relevance without padding for phase."
        ),
    )
    budget_tokens: int = Field(
        description="Most tokens the whole prompt may have (template and question included)."
    )
    options: Any = Field(
        default=None,
        description=(
            "phaseaware.AssemblyOptions or a dict of its fields (strategy, pad, repeat, "
            "position_offset for tokens the server adds before the prompt, ...)."
        ),
    )
    endpoint: Any = Field(
        default=None,
        description=(
            "What `phaseaware probe-endpoint` learned about the server: a phaseaware "
            "EndpointRecord, a record path or {'base_url': ..., 'model': ...}. Sets the "
            "offset (or, for a varying endpoint, the offset set: robust placement); a record "
            "probed with another tokenizer is refused (FingerprintMismatchError)."
        ),
    )
    messages: list[dict[str, str]] | None = Field(
        default=None,
        description=(
            "The conversation the synthesizer sends, OpenAI-style, with one {context} and "
            "{question} for the query; default: LlamaIndex's chat text-QA prompt."
        ),
    )

    _target: Target = PrivateAttr()
    _messages: list[dict[str, str]] = PrivateAttr()

    def __init__(self, **data: Any) -> None:
        super().__init__(**data)
        self._target = resolve_target(
            AssemblyRequest(
                tokenizer=self.tokenizer,
                chat_format=self.chat_format,
                profile=self.profile,
                budget_tokens=self.budget_tokens,
                options=self.options,
            ),
            endpoint=self.endpoint,
        )
        self._messages = (
            [dict(m) for m in self.messages]
            if self.messages is not None
            else default_text_qa_messages()
        )

    @classmethod
    def class_name(cls) -> str:
        return "PhaseAwarePostprocessor"

    @property
    def target(self) -> Target:
        """The resolved tokenizer, chat format, profile, budget, options and endpoint."""
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
        self,
        nodes: list[NodeWithScore],
        query_bundle: QueryBundle | None = None,
    ) -> list[NodeWithScore]:
        planned = self.plan(nodes, query_bundle)
        return list(planned.nodes) if planned is not None else []

    async def _apostprocess_nodes(
        self,
        nodes: list[NodeWithScore],
        query_bundle: QueryBundle | None = None,
    ) -> list[NodeWithScore]:
        # Planning is CPU work (tokenizing); keep the event loop free while it runs.
        planned = await asyncio.to_thread(self.plan, list(nodes), query_bundle)
        return list(planned.nodes) if planned is not None else []
