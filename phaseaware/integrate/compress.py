"""Records for a prompt the caller only describes: a document compressor's job.

A compressor (LangChain's ``BaseDocumentCompressor``) sees the retrieved records and the
query, never the prompt, so it is told the text around them: the text before (``prefix``)
or its token count (``prefix_tokens``) and the text after (``suffix``). It hands back the
admitted records as new texts in the planned order, pads included, the last one also
carrying the context's tail (end pad, restated evidence), so that
``prefix + CHUNK_SEPARATOR.join(texts) + suffix`` is the assembled prompt byte for byte.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from phaseaware.assembly.inputs.request import AssemblyRequest
from phaseaware.assembly.prepare.render import CHUNK_SEPARATOR
from phaseaware.endpoints import EndpointRef
from phaseaware.errors import VerificationError
from phaseaware.integrate.calls import FixedLayout, assemble_records
from phaseaware.integrate.checks import check_fixed_prompt
from phaseaware.integrate.records import SourceRecord
from phaseaware.integrate.report import placed_records, placement_report
from phaseaware.integrate.target import APPEND_OPTIONS, Target, resolve_target

__all__ = ["SUMMARY_KEYS", "CompressedRecord", "FixedPrompt", "fixed_prompt"]

SUMMARY_KEYS = (  # the placement report's keys every compressed record carries
    "token_count",
    "expected_accuracy",
    "naive_expected_accuracy",
    "padding_tokens",
    "profile",
    "period",
    "position_offset",
    "tokenizer",
    "dropped",
    "merged_duplicates",
)


@dataclass(frozen=True)
class CompressedRecord:
    """One admitted record in context order: its input index, its new text (pad included;
    the last also carries the context's tail), its placement report entry and the
    summary of the whole assembly (:data:`SUMMARY_KEYS`, ``exact_prefix``, ``robust``)."""

    index: int
    text: str
    placement: dict[str, Any]
    summary: dict[str, Any]


@dataclass(frozen=True)
class FixedPrompt:
    """The target and layout of a prompt known by the text around its records (see the
    module docstring); ``exact_prefix``: the prefix text is known, not only its count."""

    target: Target
    layout: FixedLayout
    exact_prefix: bool

    def compress(
        self, records: Sequence[SourceRecord], *, ids: Sequence[object], question: str
    ) -> list[CompressedRecord]:
        """The admitted ``records`` in context order (those the budget cannot hold are left
        out: the summary's ``dropped``; no records: none). ``ids``: each record's own id,
        for the report. ``VerificationError`` if the context is not the texts joined."""
        if not records:
            return []
        result = assemble_records(
            records, target=self.target, layout=self.layout, question=question
        )
        report = placement_report(result, ids)
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
        summary = {key: report[key] for key in SUMMARY_KEYS}
        summary["exact_prefix"] = self.exact_prefix
        if result.robust is not None:  # an offset set: no single residue is known
            summary["robust"] = report["robust"]
        return [
            CompressedRecord(p.index, text, p.placement, summary)
            for text, p in zip(texts, placed, strict=True)
        ]


def fixed_prompt(
    request: AssemblyRequest,
    *,
    endpoint: EndpointRef = None,
    prefix: str | None,
    prefix_tokens: int | None,
    suffix: str = "",
    separator: str = CHUNK_SEPARATOR,
) -> FixedPrompt:
    """The prompt around a compressor's records, checked (:func:`check_fixed_prompt`) and
    resolved once. ``request`` has no chat format; without its ``options`` nothing is
    restated (a restated block is no record's); the endpoint record's offset comes
    before ``prefix_tokens`` (:meth:`Target.after_prefix`)."""
    check_fixed_prompt(prefix=prefix, prefix_tokens=prefix_tokens, separator=separator)
    target = resolve_target(request, endpoint=endpoint, default_options=APPEND_OPTIONS)
    if prefix_tokens is not None:  # the prefix's tokens come after the server's
        target = target.after_prefix(prefix_tokens)
    return FixedPrompt(target, FixedLayout(prefix or "", suffix), exact_prefix=prefix is not None)
