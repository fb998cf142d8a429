"""A synthesis step, framework-free: the conversation it fills, the plan it sends, the count.

A synthesizer renders its prompt template once with two unique tags, and
:func:`tagged_conversation` turns them into phaseaware's ``{context}`` and ``{question}``
(refusing a template whose own text holds those). Per call, :func:`plan_to_send` sends
the plan the records carry (:func:`.sent.carried_plan`) or plans again, warning when a
plan was there to lose; :func:`reply_prompt_tokens` reads a reply's prompt token count
(a stream's usage chunk comes last, so it keeps what an earlier chunk reported).
"""

from __future__ import annotations

import secrets
from collections.abc import Callable, Sequence
from typing import Any, TypeVar

from phaseaware.assembly.report.result import AssemblyResult
from phaseaware.endpoints import reported_prompt_tokens
from phaseaware.errors import InputError
from phaseaware.integrate.sent import PlanSent, carried_plan, replan_warning

__all__ = ["PLACEHOLDERS", "plan_to_send", "reply_prompt_tokens", "tagged_conversation"]

PLACEHOLDERS = ("{context}", "{question}")
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


def plan_to_send(
    assemblies: Sequence[object],
    placements: Sequence[object],
    *,
    key: str,
    ids: Sequence[object],
    texts: Sequence[str | None],
    carried: bool,
    replan: Callable[[], tuple[AssemblyResult, _T]],
    kept: _T,
    who: str,
    planner: str,
    fix: str,
    what: str = "records",
    stacklevel: int = 3,
) -> tuple[PlanSent, _T]:
    """The plan the records carry (arguments as :func:`carried_plan`) with ``kept``, the
    records as they are; else ``replan()``'s result and new records. ``carried``: whether
    any record holds a plan (made by ``planner``); losing it warns, naming ``fix``."""
    report, reason = carried_plan(assemblies, placements, key=key, ids=ids, texts=texts, what=what)
    if report is not None:
        return PlanSent.of(report, replanned=False), kept
    if carried:
        replan_warning(
            who, f"{reason} (by {planner})", fix=fix, what=what, stacklevel=stacklevel + 1
        )
    result, records = replan()
    return PlanSent.of(result, replanned=True), records


def reply_prompt_tokens(raw: Any, fallback: object = None, before: int | None = None) -> int | None:
    """The prompt token count a reply reports: ``usage.prompt_tokens`` of its ``raw``
    OpenAI-style response, else ``fallback`` (the framework's own field) when that is an
    integer, else ``before`` (what a stream's earlier chunks reported)."""
    value = reported_prompt_tokens(raw)
    value = fallback if value is None else value
    return value if isinstance(value, int) and not isinstance(value, bool) else before
