"""``PhaseAwareCompressor``: the drop-in path for ``ContextualCompressionRetriever``.

A compressor sees documents and the query, never the prompt, so it is told what surrounds
them: the text before (``prefix``, BOS and chat markers included) or its token count
(``prefix_tokens``), the text after (``suffix``) and the separator. It returns NEW
documents in the planned order: pad + original text (the last also carries the context's
tail); ``metadata["phaseaware"]`` holds the placement and a summary.

Exact when the final prompt is ``prefix + "\n\n".join(page_contents) + suffix`` byte for
byte (documents inserted unchanged, in the returned order, ``document_prompt=
"{page_content}"``), and with ``prefix_tokens`` the prefix's last token does not merge with
the first document (true after a special token or newline). Otherwise (templates that
add text per document, reordering, another chat format on the server) the order is still
phase-aware and the positions are estimates; :class:`~langchain_phaseaware.PhaseAwarePrompt`
is the exact path.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from langchain_core.callbacks import Callbacks
from langchain_core.documents import Document
from langchain_core.documents.compressor import BaseDocumentCompressor
from pydantic import ConfigDict, Field, PrivateAttr, ValidationError

from langchain_phaseaware.convert import SCORE_KEYS, document_records
from langchain_phaseaware.prompt import placement_report
from phaseaware.errors import PhaseawareError, VerificationError
from phaseaware.integrate import (
    APPEND_OPTIONS,
    CHUNK_SEPARATOR,
    AssemblyRequest,
    FixedLayout,
    Target,
    assemble_records,
    check_fixed_prompt,
    placed_records,
    resolve_target,
)

__all__ = ["PhaseAwareCompressor"]

_SUMMARY_KEYS = (
    "token_count",
    "expected_accuracy",
    "naive_expected_accuracy",
    "padding_tokens",
    "profile",
    "period",
    "position_offset",
    "tokenizer",
    "dropped",
)


class PhaseAwareCompressor(BaseDocumentCompressor):
    """Order and pad documents for a known prompt: exactly one of ``prefix`` and
    ``prefix_tokens``; an endpoint record's offset comes before ``prefix_tokens``."""

    model_config = ConfigDict(arbitrary_types_allowed=True)

    tokenizer: Any = Field(description="a phaseaware tokenizer spec or Tokenizer object")
    profile: Any = Field(description="model name, profile path, Profile or None")
    budget_tokens: int = Field(description="most tokens of the whole prompt")
    prefix: str | None = Field(None, description="the exact prompt text before the documents")
    prefix_tokens: int | None = Field(None, description="or only its token count")
    suffix: str = Field("", description="the exact prompt text after the documents")
    separator: str = Field(CHUNK_SEPARATOR, description="what joins the documents")
    options: Any = Field(None, description="AssemblyOptions or a dict of its fields")
    endpoint: Any = Field(None, description="an endpoint record: its offset (set) is used")
    score_keys: tuple[str, ...] = Field(SCORE_KEYS, description="metadata keys of the score")
    evidence_key: str | None = Field("evidence", description="metadata key of the evidence")
    metadata_key: str = Field("phaseaware", description="metadata key of the report")

    _target: Target = PrivateAttr()
    _layout: FixedLayout = PrivateAttr()

    def __init__(self, **data: Any) -> None:
        check_fixed_prompt(  # before pydantic, so the caller gets phaseaware's typed errors
            prefix=data.get("prefix"), prefix_tokens=data.get("prefix_tokens"),
            separator=data.get("separator", CHUNK_SEPARATOR), chunk_separator=CHUNK_SEPARATOR,
        )  # fmt: skip
        try:
            super().__init__(**data)
        except ValidationError as exc:  # a typed error from model_post_init, unwrapped
            typed = [e.get("ctx", {}).get("error") for e in exc.errors()]
            raise next((c for c in typed if isinstance(c, PhaseawareError)), exc) from None

    def model_post_init(self, context: Any) -> None:
        target = resolve_target(
            AssemblyRequest(
                tokenizer=self.tokenizer,
                chat_format=None,
                profile=self.profile,
                budget_tokens=self.budget_tokens,
                options=self.options,
            ),
            endpoint=self.endpoint,
            default_options=APPEND_OPTIONS,  # a restated block is no document's
        )
        if self.prefix_tokens is not None:  # the prefix's tokens come after the server's
            target = target.after_prefix(self.prefix_tokens)
        self._target = target
        self._layout = FixedLayout(self.prefix or "", self.suffix)

    def compress_documents(
        self,
        documents: Sequence[Document],
        query: str,
        callbacks: Callbacks | None = None,
    ) -> Sequence[Document]:
        """New documents in the planned order; those the budget cannot hold are left out
        (the summary's ``dropped``)."""
        records = document_records(
            documents, score_keys=self.score_keys, evidence_key=self.evidence_key
        )
        if not records:
            return []
        result = assemble_records(records, target=self._target, layout=self._layout, question=query)
        report = placement_report(result, documents)
        placed = placed_records(result, report)
        texts = [p.segment.text for p in placed]
        joined = CHUNK_SEPARATOR.join(texts)
        if not result.context.startswith(joined):
            raise VerificationError(
                "the assembled context is not its documents joined by the separator; "
                "report this as a phaseaware bug"
            )
        if texts:
            texts[-1] += result.context[len(joined) :]  # end pad / restated evidence
        summary = {key: report[key] for key in _SUMMARY_KEYS}
        summary["exact_prefix"] = self.prefix is not None
        if result.robust is not None:  # an offset set: no single residue is known
            summary["robust"] = report["robust"]
        out = []
        for text, p in zip(texts, placed, strict=True):
            original = documents[p.index]
            metadata = dict(original.metadata)
            metadata[self.metadata_key] = {"placement": p.placement, "assembly": summary}
            out.append(Document(page_content=text, metadata=metadata, id=original.id))
        return out
