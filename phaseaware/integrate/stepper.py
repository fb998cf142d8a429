"""One adapter's agent-step state: what every step of one adapter instance shares.

:class:`AgentStepper` holds the checked :class:`~phaseaware.integrate.AgentPolicy` and
:class:`~phaseaware.integrate.Target`, the :class:`~phaseaware.integrate.MessageMemo` of
converted messages, the parallel-results warning flag and, for frameworks that resend
their own unaligned messages every step, a bounded memory of the message sent per tool
call id (with its report), the :class:`~phaseaware.integrate.made.CallNeutralizer` that
breaks control strings the model wrote into its text, reasoning and tool calls, and the
:class:`~phaseaware.integrate.results.ResultNeutralizer` that breaks those in the tool
results a step sends unaligned. The deciding stays in :mod:`.agent` (:func:`step_index`,
:func:`align_step`); the adapter converts its messages and its documents.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import Any, Generic, TypeVar

from phaseaware.assembly.report.result import AssemblyResult
from phaseaware.endpoints import UsageCheck
from phaseaware.integrate.agent import (
    AgentPolicy,
    AgentStep,
    MessageMemo,
    SentMemory,
    align_step,
    step_index,
)
from phaseaware.integrate.calls import OnMismatch
from phaseaware.integrate.checks import check_raw_usage, tools_fix
from phaseaware.integrate.made import CallNeutralizer
from phaseaware.integrate.neutral import NeutralCall, NeutralText
from phaseaware.integrate.records import SourceRecord
from phaseaware.integrate.results import ResultNeutralizer
from phaseaware.integrate.target import Target

__all__ = ["AgentStepper"]

_M = TypeVar("_M")


class AgentStepper(Generic[_M]):
    """The agent-step state of one adapter instance over framework messages ``_M``.

    ``convert(message, index)`` and ``text(message)``: the adapter's conversions (as for
    :class:`MessageMemo`); ``adapter``: its class name, for the bound-tools fix;
    ``max_sent``: how many tool call ids :meth:`remember` keeps (oldest evicted);
    ``rebuild_calls(message, calls)``: a new message with those neutralised tool calls,
    ``rebuild_text(message, text)``: a new message with that neutralised text and reasoning
    (:class:`CallNeutralizer`; :meth:`align` sends it in place of the model's own), also
    used for a tool result's neutralised text (:class:`ResultNeutralizer`: the results
    :meth:`align` sends unaligned).
    """

    def __init__(
        self,
        target: Target,
        policy: AgentPolicy,
        *,
        convert: Callable[[_M, int], dict[str, Any]],
        text: Callable[[_M], object],
        adapter: str,
        max_sent: int = 4096,
        rebuild_calls: Callable[[_M, Sequence[NeutralCall]], _M] | None = None,
        rebuild_text: Callable[[_M, NeutralText], _M] | None = None,
    ) -> None:
        self.target = target
        self.policy = policy
        self._text = text
        self._fix = tools_fix(adapter)
        self._memo = MessageMemo(convert, text)
        self._warned = [False]
        self.sent: SentMemory[tuple[object, _M, dict[str, Any]]] = SentMemory(max_sent)
        self._calls = (
            None if rebuild_calls is None and rebuild_text is None
            else CallNeutralizer(convert=convert, rebuild=rebuild_calls, rebuild_text=rebuild_text)
        )  # fmt: skip
        self._results = (
            None if rebuild_text is None
            else ResultNeutralizer(convert=convert, rebuild=rebuild_text)
        )  # fmt: skip

    def step(
        self,
        messages: Sequence[_M],
        *,
        aligned: Callable[[int], bool],
        records: Callable[[_M], Sequence[SourceRecord] | None] | None = None,
        tools: Sequence[Mapping[str, Any]] = (),
    ) -> AgentStep | None:
        """The kit's step over ``messages`` (as the model gets them): ``None`` when no
        message aligns or nothing is placed. ``aligned(i)``: whether message ``i`` was
        aligned already; ``records(message)``: its documents (``None``: its text split,
        ids ``None``); ``tools``: the bound OpenAI tool schemas."""
        dicts = self._memo.dicts(messages)
        index = step_index(dicts, policy=self.policy, aligned=aligned, warned=self._warned)
        if index is None:
            return None
        return self._aligned(messages, dicts, index, records, tools)

    def _aligned(
        self,
        messages: Sequence[_M],
        dicts: Sequence[dict[str, Any]],
        index: int,
        records: Callable[[_M], Sequence[SourceRecord] | None] | None,
        tools: Sequence[Mapping[str, Any]],
    ) -> AgentStep | None:
        found = records(messages[index]) if records is not None else None
        return align_step(
            self.target, self.policy, messages=dicts, index=index, records=found,
            tools=tools, fix=self._fix,
        )  # fmt: skip

    def align(
        self,
        messages: Sequence[_M],
        *,
        call_id: Callable[[_M], object],
        aligned: Callable[[_M], bool],
        rebuild: Callable[[_M, AgentStep], _M],
        records: Callable[[_M], Sequence[SourceRecord] | None] | None = None,
        tools: Sequence[Mapping[str, Any]] = (),
    ) -> tuple[list[_M], AgentStep | None]:
        """:meth:`step` for a framework that resends its own unaligned messages: each tool
        result sent aligned before is replaced by what was sent (:meth:`resent`), the new
        one by ``rebuild(original, step)`` (remembered), an assistant message whose text,
        reasoning or tool calls hold control strings by its neutralised copy, and a tool
        result sent unaligned whose text holds them by its neutralised copy (the aligned one
        is looked up in ``records`` by its own text). ``call_id(message)``: its tool call id
        (``None``: not a tool result); ``aligned(message)``: it carries a report."""
        out = [self.resent(call_id(m), m) for m in messages]
        dicts = self._memo.dicts(out)
        if self._calls is not None:
            out, dicts = self._calls.neutral(self.target, out, dicts)
        index = step_index(
            dicts, policy=self.policy, aligned=lambda i: aligned(out[i]), warned=self._warned
        )
        if self._results is not None:  # every result sent unaligned: broken
            out, dicts = self._results.neutral(self.target, out, dicts, keep=index)
        step = None if index is None else self._aligned(out, dicts, index, records, tools)
        if step is None and index is not None and self._results is not None:
            out, dicts = self._results.neutral(self.target, out, dicts)  # it goes out as it is
        if step is not None:
            original = out[step.index]
            out[step.index] = rebuild(original, step)
            known = call_id(original)
            if isinstance(known, str):  # without an id nothing can be resent later
                self.remember(known, original, out[step.index], step.report)
        return out, step

    def resent(self, call_id: object, message: _M) -> _M:
        """The message sent for tool call ``call_id`` while ``message`` still has the text
        it had then; else ``message``."""
        known = self.sent.get(call_id) if isinstance(call_id, str) else None
        return known[1] if known is not None and known[0] == self._text(message) else message

    def remember(self, call_id: str, original: _M, sent: _M, report: dict[str, Any]) -> None:
        """``sent`` (with ``report``) went out for tool call ``call_id`` instead of
        ``original``; :meth:`resent` returns it while the original's text is unchanged."""
        self.sent.put(call_id, (self._text(original), sent, report))

    def report(self, call_id: str) -> dict[str, Any] | None:
        """The report of what was sent for ``call_id`` (``None``: nothing, or forgotten)."""
        known = self.sent.get(call_id)
        return None if known is None else known[2]

    def last_report(self) -> dict[str, Any] | None:
        """The report of what was remembered last (``None``: nothing yet)."""
        newest = self.sent.newest()
        return None if newest is None else newest[2]

    def check(
        self, result: AssemblyResult | None, raw: Any, *, on_mismatch: OnMismatch
    ) -> UsageCheck | None:
        """:func:`check_raw_usage` of a reply to an aligned call (``result``: its plan;
        ``None``: nothing was aligned, nothing checked)."""
        if result is None:
            return None
        tokenizer = self.target.tokenizer
        return check_raw_usage(
            self.target, planned_tokens=result.token_count, raw=raw, on_mismatch=on_mismatch,
            planned_ids=lambda: tokenizer.encode(result.prompt),  # only where ids came back
        )  # fmt: skip

    def reset(self) -> None:
        """Forget what was sent and converted (a new conversation)."""
        self.sent.clear()
        self._memo.clear()
        if self._calls is not None:
            self._calls.clear()
        if self._results is not None:
            self._results.clear()
