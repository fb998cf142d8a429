"""A synthesis step, framework-free: the conversation it fills, the plan it sends, the count.

A synthesizer renders its prompt template once with two unique tags, and
:func:`tagged_conversation` turns them into phaseaware's ``{context}`` and ``{question}``
(refusing a template whose own text holds those). A postprocessor step plans the records
into that conversation with :func:`assemble_carried` and each record carries the report
in its metadata (:func:`carried_metadata`; :func:`carried_text` strips the pad again);
per call, :func:`plan_to_send` sends the plan the records carry (:func:`.sent.carried_plan`)
or plans again, warning when a plan was there to lose; :func:`reply_prompt_tokens` reads
a reply's prompt token count (a stream's usage chunk comes last, so it keeps what an
earlier chunk reported).
"""

from __future__ import annotations

import copy
import secrets
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, TypeVar

from phaseaware.assembly.report.result import AssemblyResult
from phaseaware.endpoints import reported_prompt_tokens
from phaseaware.errors import InputError
from phaseaware.integrate.calls import assemble_records, conversation
from phaseaware.integrate.records import SourceRecord
from phaseaware.integrate.report import PlacedRecord, placed_records, placement_report
from phaseaware.integrate.sent import PlanSent, carried_plan, replan_warning
from phaseaware.integrate.target import Target

__all__ = [
    "ASSEMBLY_KEY",
    "CARRIED_KEYS",
    "PLACEHOLDERS",
    "PLACEMENT_KEY",
    "CarriedAssembly",
    "assemble_carried",
    "carried_metadata",
    "carried_text",
    "plan_to_send",
    "reply_prompt_tokens",
    "tagged_conversation",
]

PLACEHOLDERS = ("{context}", "{question}")
PLACEMENT_KEY = "phaseaware_placement"  # a record's metadata: its placement entry
ASSEMBLY_KEY = "phaseaware_assembly"  # a record's metadata: the whole report (shared per call)
CARRIED_KEYS = (PLACEMENT_KEY, ASSEMBLY_KEY)
_T = TypeVar("_T")


def tagged_conversation(
    render: Callable[[str, str], list[dict[str, str]]],
    *,
    template: str = "the text QA template",
    context_variable: str = "{context_str}",
) -> list[dict[str, str]]:
    """``render(context_tag, question_tag)`` (the framework's messages for its prompt
    ``template``, OpenAI-style dicts) with the tags written ``{context}`` and
    ``{question}``; ``InputError`` when the template's own text holds either placeholder
    or does not use ``context_variable`` (its own name for the context) exactly once."""
    tag = secrets.token_hex(8)
    context, question = f"PHASEAWARE_CONTEXT_{tag}", f"PHASEAWARE_QUERY_{tag}"
    messages = render(context, question)
    for message in messages:
        for literal in PLACEHOLDERS:
            if literal in message["content"]:
                raise InputError(
                    f"{template}'s own text contains {literal} literally; reword it "
                    "(phaseaware uses {context} and {question} as its placeholders)"
                )
        message["content"] = (
            message["content"].replace(context, "{context}").replace(question, "{question}")
        )
    if sum(m["content"].count("{context}") for m in messages) != 1:
        raise InputError(
            f"{template} must use {context_variable} exactly once; phaseaware places the "
            "retrieved chunks there"
        )
    return messages


def carried_metadata(
    metadata: Mapping[str, Any], *, placement: Mapping[str, Any], report: Mapping[str, Any]
) -> dict[str, Any]:
    """A record's new metadata: its own, deep-copied (an earlier plan's keys dropped), plus
    :data:`PLACEMENT_KEY` (a copy of its placement entry) and :data:`ASSEMBLY_KEY`
    (``report``: one dict shared by the records of a call)."""
    out = {k: copy.deepcopy(v) for k, v in metadata.items() if k not in CARRIED_KEYS}
    out[PLACEMENT_KEY] = dict(placement)
    out[ASSEMBLY_KEY] = report
    return out


def carried_text(text: str, metadata: Mapping[str, Any]) -> str | None:
    """``text`` without the pad its plan put before it (``None``: it carries no plan)."""
    placement = metadata.get(PLACEMENT_KEY)
    if not isinstance(placement, Mapping):
        return None
    return text[int(placement["char_start"]) - int(placement["segment_char_start"]) :]


@dataclass(frozen=True)
class CarriedAssembly:
    """One assembly whose records carry its plan: the result, the report each record
    carries (:func:`placement_report` plus ``conversation_key``), the admitted records in
    context order, and the key (:meth:`Target.plan_key` of the conversation and question)."""

    result: AssemblyResult
    report: dict[str, Any]
    placed: list[PlacedRecord]
    key: str


def assemble_carried(
    records: Sequence[SourceRecord],
    *,
    target: Target,
    messages: Sequence[Mapping[str, Any]],
    question: str,
    what: str = "records",
) -> CarriedAssembly:
    """Assemble ``records`` into ``messages`` (one ``{context}``) for a later synthesis
    step, which sends the plan while the records carry it intact (:func:`plan_to_send`)."""
    layout = conversation(target, messages, question=question)
    result = assemble_records(records, target=target, layout=layout, question=question, what=what)
    key = target.plan_key(messages, question)
    report = {**placement_report(result, [r.id for r in records]), "conversation_key": key}
    return CarriedAssembly(result, report, placed_records(result, report), key)


def plan_to_send(
    metadata: Sequence[Mapping[str, Any]],
    *,
    target: Target,
    messages: Sequence[Mapping[str, Any]],
    question: str,
    ids: Sequence[object],
    texts: Sequence[str | None],
    replan: Callable[[], tuple[AssemblyResult, _T]],
    kept: _T,
    who: str,
    planner: str,
    fix: str,
    what: str = "records",
    stacklevel: int = 3,
) -> tuple[PlanSent, _T]:
    """The plan the records carry (their ``metadata``, ``ids`` and current ``texts``, as
    :func:`carried_plan` checks them, for this conversation and question) with ``kept``,
    the records as they are; else ``replan()``'s result and new records. When a record
    held a plan (made by ``planner``), losing it warns, naming ``fix``."""
    report, reason = carried_plan(
        [m.get(ASSEMBLY_KEY) for m in metadata], [m.get(PLACEMENT_KEY) for m in metadata],
        key=target.plan_key(messages, question), ids=ids, texts=texts, what=what,
    )  # fmt: skip
    if report is not None:
        return PlanSent.of(report, replanned=False), kept
    if any(ASSEMBLY_KEY in m for m in metadata):
        replan_warning(
            who, f"{reason} (by {planner})", fix=fix, what=what, stacklevel=stacklevel + 1
        )
    result, records = replan()
    return PlanSent.of(result, replanned=True), records


def reply_prompt_tokens(raw: Any, fallback: object = None, before: int | None = None) -> int | None:
    """The prompt token count a reply reports: ``usage.prompt_tokens`` of its ``raw``
    OpenAI-style response, else ``fallback`` (the framework's own field) when that is an
    integer, else ``before`` (what a stream's earlier chunks reported)."""
    reported = reported_prompt_tokens(raw)
    value = fallback if reported is None else reported
    return value if isinstance(value, int) and not isinstance(value, bool) else before
