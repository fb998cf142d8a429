"""``PhaseAwareReorder``: a drop-in for ``LongContextReorder``: the same documents, none
dropped or changed, in the kit's order (:func:`phaseaware.integrate.reorder_records`).
Relevance: the first of ``score_keys`` in the metadata, else retrieval order."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from langchain_core.documents import BaseDocumentTransformer, Document
from pydantic import BaseModel, ConfigDict, Field, PrivateAttr

from langchain_phaseaware.convert import SCORE_KEYS, document_records
from phaseaware.integrate import reorder_profile, reorder_records

__all__ = ["PhaseAwareReorder"]


class PhaseAwareReorder(BaseDocumentTransformer, BaseModel):
    """Reorder documents: lost in the middle without a profile, phase-aware with one."""

    model_config = ConfigDict(arbitrary_types_allowed=True)

    profile: Any = Field(
        default=None,
        description="a model name, profile path or Profile; None: lost in the middle",
    )
    score_keys: tuple[str, ...] = Field(SCORE_KEYS, description="metadata keys of the score")

    _profile: Any = PrivateAttr(default=None)

    def __init__(self, **data: Any) -> None:
        super().__init__(**data)
        self._profile = reorder_profile(self.profile)  # a bad name fails here, not per call

    def transform_documents(
        self, documents: Sequence[Document], **kwargs: Any
    ) -> Sequence[Document]:
        """``documents`` in context order, as a new list of the same objects."""
        records = document_records(documents, score_keys=self.score_keys, evidence_key=None)
        order = reorder_records(records, profile=self._profile, what="documents")
        return [documents[i] for i in order]
