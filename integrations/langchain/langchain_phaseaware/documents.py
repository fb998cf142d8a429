"""Drop-ins that take and return a retrieved ``Document`` list: the compressor and the reorder."""

from __future__ import annotations

import asyncio
from collections.abc import Sequence
from typing import Any

from langchain_core.callbacks import Callbacks
from langchain_core.documents import BaseDocumentTransformer, Document
from langchain_core.documents.compressor import BaseDocumentCompressor
from pydantic import BaseModel, ConfigDict, Field, PrivateAttr, ValidationError

import phaseaware.integrate as kit
from langchain_phaseaware.convert import SCORE_KEYS, document_records
from phaseaware.errors import PhaseawareError

__all__ = ["PhaseAwareCompressor", "PhaseAwareReorder"]


class PhaseAwareCompressor(BaseDocumentCompressor):
    """For ``ContextualCompressionRetriever``: order and pad documents for a prompt it is
    told about (exactly one of ``prefix`` and ``prefix_tokens``; an endpoint record's offset
    comes before ``prefix_tokens``), with the kit's :mod:`~phaseaware.integrate.compress`.
    When the result is exact: the README; ``PhaseAwarePrompt`` is the exact path."""

    model_config = ConfigDict(arbitrary_types_allowed=True)

    tokenizer: Any = Field(description="a phaseaware tokenizer spec or Tokenizer object")
    profile: Any = Field(description="model name, profile path, Profile or None")
    budget_tokens: int = Field(description="most tokens of the whole prompt")
    prefix: str | None = Field(None, description="the exact prompt text before the documents")
    prefix_tokens: int | None = Field(None, description="or only its token count")
    suffix: str = Field("", description="the exact prompt text after the documents")
    separator: str = Field(kit.CHUNK_SEPARATOR, description="what joins the documents")
    options: Any = Field(None, description="AssemblyOptions or a dict of its fields")
    endpoint: Any = Field(None, description="an endpoint record: its offset (set) is used")
    score_keys: tuple[str, ...] = Field(SCORE_KEYS, description="metadata keys of the score")
    evidence_key: str | None = Field("evidence", description="metadata key of the evidence")
    metadata_key: str = Field("phaseaware", description="metadata key of the report")

    _fixed: kit.FixedPrompt = PrivateAttr()

    def __init__(self, **data: Any) -> None:
        kit.check_fixed_prompt(  # before pydantic, so the caller gets phaseaware's typed errors
            prefix=data.get("prefix"), prefix_tokens=data.get("prefix_tokens"),
            separator=data.get("separator", kit.CHUNK_SEPARATOR),
        )  # fmt: skip
        try:
            super().__init__(**data)
        except ValidationError as exc:  # a typed error from model_post_init, unwrapped
            typed = [e.get("ctx", {}).get("error") for e in exc.errors()]
            raise next((c for c in typed if isinstance(c, PhaseawareError)), exc) from None

    def model_post_init(self, context: Any) -> None:
        request = kit.AssemblyRequest(
            tokenizer=self.tokenizer, chat_format=None, profile=self.profile,
            budget_tokens=self.budget_tokens, options=self.options,
        )  # fmt: skip
        self._fixed = kit.fixed_prompt(
            request, endpoint=self.endpoint, prefix=self.prefix, prefix_tokens=self.prefix_tokens,
            suffix=self.suffix, separator=self.separator,
        )  # fmt: skip

    def compress_documents(
        self, documents: Sequence[Document], query: str, callbacks: Callbacks | None = None
    ) -> Sequence[Document]:
        """New documents in the planned order (those the budget cannot hold: left out)."""
        records = document_records(
            documents, score_keys=self.score_keys, evidence_key=self.evidence_key
        )
        ids = [d.id for d in documents]
        out = []
        for c in self._fixed.compress(records, ids=ids, question=query):
            original = documents[c.index]
            report = {"placement": c.placement, "assembly": c.summary}
            metadata = {**original.metadata, self.metadata_key: report}
            out.append(Document(page_content=c.text, metadata=metadata, id=original.id))
        return out

    async def acompress_documents(
        self, documents: Sequence[Document], query: str, callbacks: Callbacks | None = None
    ) -> Sequence[Document]:
        """:meth:`compress_documents` in a worker thread (``asyncio.to_thread``: tokenizing
        is CPU work, kept off the event loop): the same documents."""
        return await asyncio.to_thread(self.compress_documents, documents, query, callbacks)


class PhaseAwareReorder(BaseDocumentTransformer, BaseModel):
    """For ``LongContextReorder``: the same documents, none changed, in the kit's order
    (:func:`phaseaware.integrate.reorder_records`): lost in the middle without a profile,
    phase-aware with one; relevance: the first of ``score_keys`` in the metadata, else
    retrieval order. Copies under one ``Document.id`` (a hybrid retriever's) are merged
    into the best-scored one; different texts under one id raise ``InputError``."""

    model_config = ConfigDict(arbitrary_types_allowed=True)

    profile: Any = Field(
        default=None, description="a model name, profile path or Profile; None: lost in the middle"
    )
    score_keys: tuple[str, ...] = Field(SCORE_KEYS, description="metadata keys of the score")

    _profile: Any = PrivateAttr(default=None)

    def __init__(self, **data: Any) -> None:
        super().__init__(**data)
        self._profile = kit.reorder_profile(self.profile)  # a bad name fails here, not per call

    def transform_documents(
        self, documents: Sequence[Document], **kwargs: Any
    ) -> Sequence[Document]:
        """``documents`` in context order, as a new list of the same objects."""
        records = document_records(documents, score_keys=self.score_keys, evidence_key=None)
        order = kit.reorder_records(records, profile=self._profile, what="documents")
        return [documents[i] for i in order]

    async def atransform_documents(
        self, documents: Sequence[Document], **kwargs: Any
    ) -> Sequence[Document]:
        """:meth:`transform_documents` on the event loop itself: ordering is arithmetic
        over the scores (no tokenizer, no I/O), so no thread hop; the same documents."""
        return self.transform_documents(documents, **kwargs)
