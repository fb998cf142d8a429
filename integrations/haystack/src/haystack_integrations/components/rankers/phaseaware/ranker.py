"""``PhaseAwareRanker``: a drop-in for Haystack's ``LostInTheMiddleRanker``."""

from __future__ import annotations

from typing import Any

from haystack import Document, component, default_from_dict, default_to_dict
from haystack_integrations.utils.phaseaware import document_records

import phaseaware.integrate as kit
from phaseaware import load_tokenizer

__all__ = ["PhaseAwareRanker"]


@component
class PhaseAwareRanker:
    """``LostInTheMiddleRanker``'s inputs and outputs (``documents`` in, ``documents``
    out; ``top_k`` at init and per run), ordered as phaseaware's other reorders order:
    lost in the middle without a ``profile``, the most relevant last (nearest the
    question) with one (:func:`phaseaware.integrate.rank_records`).

    As ``LostInTheMiddleRanker``: documents are deduplicated by id, the highest score
    kept; a document without text raises ``ValueError``; relevance is ``score``, else
    the retrieval order. Where it has ``word_count_threshold``, this ranker has
    ``token_budget``: the most relevant documents whose texts hold at most this many
    tokens of ``tokenizer`` (never crossed). The profile and tokenizer load in
    :meth:`warm_up` (``run`` calls it on first use)."""

    def __init__(
        self,
        profile: str | None = None,
        top_k: int | None = None,
        token_budget: int | None = None,
        tokenizer: str | None = None,
    ) -> None:
        self.profile = profile
        self.top_k = kit.check_limit(top_k, name="top_k")
        self.token_budget = kit.check_limit(token_budget, name="token_budget")
        self.tokenizer = tokenizer
        if token_budget is not None and tokenizer is None:
            raise ValueError("token_budget counts tokens: pass tokenizer= as well (a spec)")
        self._loaded: tuple[Any, Any] | None = None

    def warm_up(self) -> None:
        """Load the profile and the tokenizer (once)."""
        if self._loaded is None:
            tokenizer = load_tokenizer(self.tokenizer) if self.tokenizer is not None else None
            self._loaded = (kit.reorder_profile(self.profile), tokenizer)

    @component.output_types(documents=list[Document])
    def run(
        self,
        documents: list[Document],
        top_k: int | None = None,
        token_budget: int | None = None,
    ) -> dict[str, list[Document]]:
        """``documents`` deduplicated, selected and in context order (class docstring);
        ``top_k`` / ``token_budget`` given here replace the init values for this run."""
        top_k = kit.check_limit(top_k, name="top_k") or self.top_k
        token_budget = kit.check_limit(token_budget, name="token_budget") or self.token_budget
        if not documents:
            return {"documents": []}
        self.warm_up()
        assert self._loaded is not None  # noqa: S101 (warm_up sets it)
        profile, tokenizer = self._loaded
        if token_budget is not None and tokenizer is None:
            raise ValueError("token_budget counts tokens: construct the ranker with tokenizer=")
        order = kit.rank_records(
            document_records(documents, evidence_key=None), profile=profile, top_k=top_k,
            token_budget=token_budget, tokenizer=tokenizer,
        )  # fmt: skip
        return {"documents": [documents[i] for i in order]}

    @component.output_types(documents=list[Document])
    async def run_async(
        self,
        documents: list[Document],
        top_k: int | None = None,
        token_budget: int | None = None,
    ) -> dict[str, list[Document]]:
        """:meth:`run`, inline: ordering is arithmetic (a token budget also encodes the
        texts); the same output."""
        return self.run(documents, top_k=top_k, token_budget=token_budget)

    def to_dict(self) -> dict[str, Any]:
        """The component's init parameters."""
        return default_to_dict(
            self, profile=self.profile, top_k=self.top_k, token_budget=self.token_budget,
            tokenizer=self.tokenizer,
        )  # fmt: skip

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> PhaseAwareRanker:
        """The component :meth:`to_dict` wrote."""
        return default_from_dict(cls, data)
