"""What a synthesis call sends: the plan its records carry, or a new one.

A postprocessor step plans records and writes the report on each; the step that calls
the model later sends that plan unchanged, if the records still carry it intact and it
was made for the same conversation and question (:func:`carried_plan`); else it plans
again (:func:`replan_warning` says why, when a plan was there to lose).
"""

from __future__ import annotations

import warnings
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from phaseaware.assembly.report.result import AssemblyResult
from phaseaware.endpoints import UsageCheck
from phaseaware.errors import PhaseawareWarning
from phaseaware.integrate.report import stale_reason

__all__ = ["PlanSent", "carried_plan", "replan_warning"]


@dataclass(frozen=True)
class PlanSent:
    """What one synthesize call sent and what the server counted (``check`` None: no usage)."""

    messages: tuple[dict[str, str], ...] | None
    prompt: str
    token_count: int
    position_offset: int
    replanned: bool
    check: UsageCheck | None = None

    @classmethod
    def of(cls, result: AssemblyResult | Mapping[str, Any], *, replanned: bool) -> PlanSent:
        """From a result, or from its report (``to_dict()`` form) carried on the records."""
        r = result.to_dict() if isinstance(result, AssemblyResult) else result
        messages = tuple(dict(m) for m in r["messages"]) if r["messages"] else None
        return cls(messages, r["prompt"], r["token_count"], r["position_offset"], replanned)


def carried_plan(
    assemblies: Sequence[object],
    placements: Sequence[object],
    *,
    key: str,
    ids: Sequence[object],
    texts: Sequence[str | None],
    what: str = "records",
) -> tuple[Mapping[str, Any] | None, str | None]:
    """``(report, None)`` when the records (each one's carried whole-plan report and its
    placement entry, id and current text, in the order given) carry one intact plan for
    conversation ``key``; else ``(None, why)`` (``what``: the adapter's word for them)."""
    report = assemblies[0] if assemblies else None
    if not isinstance(report, Mapping):
        return None, f"the {what} carry no phaseaware plan"
    if report.get("conversation_key") != key:
        return None, f"the {what} were planned for another conversation, question or configuration"
    if not all(isinstance(p, Mapping) for p in placements):
        return None, f"one of the {what} lost its placement report"
    reason = stale_reason(report, ids=ids, texts=texts)
    return (report, None) if reason is None else (None, reason)


def replan_warning(
    who: str, reason: str, *, fix: str, what: str = "records", stacklevel: int = 3
) -> None:
    """Warn that ``who`` planned ``what`` carrying a plan again (``reason``), naming ``fix``."""
    warnings.warn(
        f"{who} planned the {what} again: {reason}; {fix}",
        PhaseawareWarning,
        stacklevel=stacklevel + 1,
    )
