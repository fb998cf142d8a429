"""``PhaseAwareCompressor``: the drop-in path for ``ContextualCompressionRetriever``.

A document compressor sees documents and the query, never the prompt, so it is told
what surrounds the documents: the prompt text before them (``prefix``, BOS and chat
markers included) or only its token count (``prefix_tokens``), the text after them
(``suffix``) and the separator the caller's template joins them with.

It returns NEW documents, in the planned order, whose ``page_content`` is the pad
(filler tokens, if any) followed by the original text verbatim; the last one also
carries the context's tail (end pad, restated evidence when ``options.repeat``).
``metadata`` is the original metadata plus ``"phaseaware"``: this document's
measured placement and a summary of the assembly. Originals are never mutated.

**When it is exact.** The reported positions are the model's positions when all of
these hold:

1. the final prompt is ``prefix + separator.join(d.page_content for d in returned)
   + suffix``, byte for byte: the documents are inserted in the returned order,
   unchanged (a stuff-documents step with ``document_prompt="{page_content}"``), and
   nothing strips, truncates or re-packs them;
2. ``separator == "\\n\\n"`` (phaseaware's chunk separator; another separator is
   refused with ``InputError``);
3. ``prefix`` is the exact text before the first document, including what the
   server renders (BOS, chat-format markers, the system prompt) and ``suffix``
   the exact text after the last one; or, with ``prefix_tokens``, the prefix's
   last token does not merge with the first document's first token (true after a
   special token or a newline for BPE tokenizers; not checked, since the text is
   unknown) and ``suffix`` is still exact (it sets the total length and the
   distance of each key to the end).

**When it is not.** A template that formats each document with extra text
(metadata, numbering), another separator, a chain that reorders or drops
documents, a server that renders another chat format, or a question that differs
from ``suffix``: the order is still phase-aware, the positions are estimates.
Use :class:`~langchain_phaseaware.PhaseAwarePrompt` for the exact path.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from langchain_core.callbacks import Callbacks
from langchain_core.documents import Document
from langchain_core.documents.compressor import BaseDocumentCompressor
from pydantic import ConfigDict, Field, PrivateAttr, ValidationError

from langchain_phaseaware.convert import SCORE_KEYS, document_records
from langchain_phaseaware.prompt import placement_report
from phaseaware import AssemblyOptions, Profile
from phaseaware.errors import InputError, PhaseawareError, VerificationError
from phaseaware.integrate import (
    APPEND_OPTIONS,
    CHUNK_SEPARATOR,
    AssemblyRequest,
    EndpointRef,
    FixedLayout,
    Target,
    Tokenizer,
    assemble_records,
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
    """Order and pad retrieved documents for a known prompt (see the module docstring).

    Pass exactly one of ``prefix`` (text) and ``prefix_tokens`` (a count).
    ``budget_tokens`` bounds the whole prompt (prefix and suffix included).
    ``endpoint``: an endpoint record; its offset comes before ``prefix_tokens``.
    """

    model_config = ConfigDict(arbitrary_types_allowed=True)

    tokenizer: Any = Field(description="a phaseaware tokenizer spec or Tokenizer object")
    profile: Any = Field(default=None, description="model name, profile path, Profile or None")
    budget_tokens: int = Field(description="most tokens of the whole prompt")
    prefix: str | None = None
    prefix_tokens: int | None = None
    suffix: str = ""
    separator: str = CHUNK_SEPARATOR
    options: Any = None
    endpoint: Any = Field(
        default=None,
        description=(
            "an endpoint record (EndpointRecord, record path or {'base_url', 'model'}) from "
            "`phaseaware probe-endpoint`: its offset (or, varying, its offset set) is used"
        ),
    )
    score_keys: tuple[str, ...] = SCORE_KEYS
    evidence_key: str | None = "evidence"
    metadata_key: str = "phaseaware"

    _target: Target = PrivateAttr()
    _layout: FixedLayout = PrivateAttr()

    def __init__(
        self,
        *,
        tokenizer: str | Tokenizer,
        profile: str | Path | Profile | None,
        budget_tokens: int,
        prefix: str | None = None,
        prefix_tokens: int | None = None,
        suffix: str = "",
        separator: str = CHUNK_SEPARATOR,
        options: AssemblyOptions | Mapping[str, Any] | None = None,
        endpoint: EndpointRef = None,
        **kwargs: Any,
    ) -> None:
        # checked before pydantic sees them, so the caller gets phaseaware's typed errors
        if (prefix is None) == (prefix_tokens is None):
            raise InputError(
                "pass exactly one of prefix= (the prompt text before the documents) and "
                f"prefix_tokens= (its token count); got prefix={prefix!r}, "
                f"prefix_tokens={prefix_tokens!r}"
            )
        if separator != CHUNK_SEPARATOR:
            raise InputError(
                f"separator={separator!r} cannot be exact: phaseaware joins documents "
                f"with {CHUNK_SEPARATOR!r}; use document_separator={CHUNK_SEPARATOR!r} in your "
                "stuff-documents step"
            )
        fields = dict(
            tokenizer=tokenizer, profile=profile, budget_tokens=budget_tokens, prefix=prefix,
            prefix_tokens=prefix_tokens, suffix=suffix, separator=separator, options=options,
            endpoint=endpoint,
        )  # fmt: skip
        try:
            super().__init__(**fields, **kwargs)
        except ValidationError as exc:  # a typed error from model_post_init, unwrapped
            causes = [e.get("ctx", {}).get("error") for e in exc.errors()]
            typed = [c for c in causes if isinstance(c, PhaseawareError)]
            if typed:
                raise typed[0] from None
            raise

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
        """New documents in the planned order (pads in ``page_content``; report in metadata).

        Documents the budget cannot hold are left out (listed in the summary's
        ``dropped``). Empty input gives an empty list.
        """
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
