"""One agent step, decided once for every framework: which message aligns, with what, and how.

A framework adapter (LangChain middleware, LlamaIndex LLM wrapper) converts its messages
to OpenAI-style dicts and calls :func:`align_step` before each model call; everything
below is policy, the same for every adapter:

- **Which message.** The last message, when it is a tool result not aligned yet (from a
  tool in :attr:`AgentPolicy.tool_names`, named by the assistant's tool call) and the only
  tool result since the last assistant turn. Several results after one assistant turn
  (parallel tool calls) are sent unaligned, with one :class:`ParallelToolResultsWarning`
  per adapter: append alignment places one new message after the text the server holds,
  and a second result would rewrite the first one's turn. A result the step cannot align
  because of what the model made (a tool call that does not pair with its result, arguments
  that are not JSON) is sent unaligned too, with one :class:`UnalignedToolResultWarning`
  naming the cause. Control strings in any result sent unaligned are broken first, as in
  any untrusted text (:mod:`.results`). Control strings the model copied into its tool
  calls are broken before the step, as in any untrusted text (:mod:`.neutral`,
  :mod:`.made`); any left (a dict-built conversation not passed through it) send the result
  unaligned the same way. Under ``control_tokens="refuse"`` nothing is broken and nothing
  is sent raw: a control string in what the model made (well formed or not) or in a tool
  result raises :class:`~phaseaware.errors.ControlTokenError` (from the kit, and from
  :func:`align_step` for the history or the aligned result, also when the history does
  not parse), before any request.
- **Its documents.** The records the adapter found for it (a LangChain tool's ``artifact``,
  the nodes a LlamaIndex retriever tool registered), else its text split on
  :attr:`AgentPolicy.document_separator` (scoreless: retrieval order).
- **The question.** The newest user message (``""`` when there is none).
- **Bound tools.** With ``tool_schemas="rendered"`` (default) their OpenAI schemas go into
  the plan (:meth:`Target.with_tools`: rendered where the format renders them, refused
  with the fix where it cannot); ``"not_rendered"`` says the server writes none into the
  prompt (the usage check confirms it on every aligned call).
- **The report.** :func:`step_report`: the placement report without the prompt and the
  messages (the conversation is the framework's), stored on the aligned tool message.
- **What was sent.** :class:`SentMemory`: a bounded map from a tool call id to the message
  sent for it, for frameworks that resend their own unaligned messages every step.

``tool_role="user"`` plans for models whose chat format has no tool role: tool results
are shown as user messages and tool-calling assistant turns as their text alone
(:func:`model_view`; the adapter shows the model the same).
"""

from __future__ import annotations

import threading
import warnings
from collections import OrderedDict
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, replace
from typing import Any, Generic, Literal, TypeVar

from phaseaware.assembly.report.result import AssemblyResult
from phaseaware.chat.errors import MessageError
from phaseaware.errors import ControlTokenError, InputError, PhaseawareWarning
from phaseaware.integrate.calls import append_records
from phaseaware.integrate.neutral import neutral_messages
from phaseaware.integrate.records import SourceRecord
from phaseaware.integrate.report import placement_report
from phaseaware.integrate.target import Target

__all__ = [
    "REPORT_KEY",
    "TOOL_ROLES",
    "TOOL_SCHEMA_POLICIES",
    "AgentPolicy",
    "AgentStep",
    "MessageMemo",
    "ParallelToolResultsWarning",
    "SentMemory",
    "UnalignedToolResultWarning",
    "align_step",
    "model_view",
    "question_of",
    "split_documents",
    "step_index",
    "step_report",
]

REPORT_KEY = "phaseaware"  # the aligned tool message's metadata key holding its report
TOOL_ROLES = ("tool", "user")
TOOL_SCHEMA_POLICIES = ("rendered", "not_rendered")
ToolRole = Literal["tool", "user"]
ToolSchemas = Literal["rendered", "not_rendered"]


class ParallelToolResultsWarning(PhaseawareWarning):
    """Several tool results after one assistant turn: sent unaligned (see the module doc)."""


class UnalignedToolResultWarning(PhaseawareWarning):
    """A tool result the step cannot align (a malformed tool call the model made, a control
    string left in its tool calls under ``control_tokens="neutralize"``): sent unaligned,
    the cause named."""


@dataclass(frozen=True)
class AgentPolicy:
    """How an agent step aligns tool results (checked once, in the adapter's constructor).

    ``message_template``: the aligned message's content, ``{context}`` once and
    ``{question}`` any number of times. ``document_separator``: splits a tool result's
    text into documents when it has no records. ``tool_names``: align results of these
    tools only (``None``: any). ``tool_role``/``tool_schemas``: see the module doc.
    """

    message_template: str = "{context}"
    document_separator: str = "\n\n"
    tool_names: frozenset[str] | None = None
    tool_role: ToolRole = "tool"
    tool_schemas: ToolSchemas = "rendered"

    def __post_init__(self) -> None:
        template = self.message_template
        if not isinstance(template, str) or template.count("{context}") != 1:
            raise InputError(
                f"message_template must hold {{context}} exactly once, got {template!r}"
            )
        if not isinstance(self.document_separator, str) or not self.document_separator:
            raise InputError("document_separator must be a non-empty string")
        if self.tool_role not in TOOL_ROLES:
            raise InputError(f"tool_role must be 'tool' or 'user', got {self.tool_role!r}")
        if self.tool_schemas not in TOOL_SCHEMA_POLICIES:
            raise InputError(
                f"tool_schemas must be 'rendered' or 'not_rendered', got {self.tool_schemas!r}"
            )
        if self.tool_names is not None:
            if isinstance(self.tool_names, str):
                raise InputError(f"tool_names must be a list of names, got {self.tool_names!r}")
            object.__setattr__(self, "tool_names", frozenset(self.tool_names))


@dataclass(frozen=True)
class AgentStep:
    """One aligned tool result: its index, new content, the assembly and its report."""

    index: int
    content: str
    result: AssemblyResult
    report: dict[str, Any]


_V = TypeVar("_V")


class SentMemory(Generic[_V]):
    """A bounded, thread-safe map (oldest entry evicted past ``max_entries``)."""

    def __init__(self, max_entries: int = 4096) -> None:
        if isinstance(max_entries, bool) or not isinstance(max_entries, int) or max_entries < 1:
            raise InputError(f"max_entries must be a positive integer, got {max_entries!r}")
        self.max_entries = max_entries
        self._items: OrderedDict[str, _V] = OrderedDict()
        self._lock = threading.Lock()

    def get(self, key: str) -> _V | None:
        with self._lock:
            return self._items.get(key)

    def put(self, key: str, value: _V) -> None:
        with self._lock:
            self._items.pop(key, None)
            self._items[key] = value
            while len(self._items) > self.max_entries:
                self._items.popitem(last=False)

    def newest(self) -> _V | None:
        """The value put last (``None``: empty)."""
        with self._lock:
            return next(reversed(self._items.values()), None)

    def pop(self, key: str) -> _V | None:
        with self._lock:
            return self._items.pop(key, None)

    def clear(self) -> None:
        with self._lock:
            self._items.clear()

    def __len__(self) -> int:
        return len(self._items)


class MessageMemo:
    """Framework messages as OpenAI-style dicts, each converted once while an agent resends
    it: keyed by the message object, checked against its text (an edit in place converts
    again); bounded like :class:`SentMemory`. ``convert(message, index)`` and
    ``text(message)`` are the adapter's own conversions."""

    def __init__(
        self,
        convert: Callable[[Any, int], dict[str, Any]],
        text: Callable[[Any], object],
        max_entries: int = 8192,
    ) -> None:
        self._convert = convert
        self._text = text
        self._memory: SentMemory[tuple[Any, object, dict[str, Any]]] = SentMemory(max_entries)

    def dicts(self, messages: Sequence[Any]) -> list[dict[str, Any]]:
        out = []
        for index, message in enumerate(messages):
            key = str(id(message))
            known = self._memory.get(key)
            text = self._text(message)
            if known is None or known[0] is not message or known[1] != text:
                known = (message, text, self._convert(message, index))
                self._memory.put(key, known)  # the message kept: its id stays unique
            out.append(known[2])
        return out

    def clear(self) -> None:
        self._memory.clear()


def question_of(messages: Sequence[Mapping[str, Any]]) -> str:
    """The question of a step: the newest user message's text (``""`` when none)."""
    for message in reversed(messages):
        if message.get("role") == "user":
            return str(message.get("content") or "")
    return ""


def split_documents(text: str, separator: str) -> list[SourceRecord]:
    """A tool result's text as scoreless records, split on ``separator`` (empty parts out)."""
    return [SourceRecord(text=t) for t in text.split(separator) if t]


def model_view(messages: Sequence[Mapping[str, Any]], tool_role: ToolRole) -> list[dict[str, Any]]:
    """What the model is shown: the messages, or with ``tool_role="user"`` tool results as
    user messages and tool-calling assistant turns as their text alone."""
    if tool_role == "tool":
        return [dict(m) for m in messages]
    out: list[dict[str, Any]] = []
    for m in messages:
        if m.get("role") == "tool":
            out.append({"role": "user", "content": m.get("content", "")})
        elif m.get("role") == "assistant" and m.get("tool_calls"):
            out.append({"role": "assistant", "content": m.get("content", "")})
        else:
            out.append(dict(m))
    return out


def _tool_name(messages: Sequence[Mapping[str, Any]], call_id: object, last: int) -> str | None:
    """The function name of the assistant's tool call ``call_id`` (before ``last``)."""
    for message in reversed(messages[:last]):
        calls = message.get("tool_calls") or ()
        for call in calls if isinstance(calls, list | tuple) else ():
            if isinstance(call, Mapping) and call.get("id") == call_id:
                function = call.get("function")  # the model made it: any shape
                return str(function.get("name")) if isinstance(function, Mapping) else None
    return None


def step_index(
    messages: Sequence[Mapping[str, Any]],
    *,
    policy: AgentPolicy,
    aligned: Callable[[int], bool],
    warned: list[bool] | None = None,
) -> int | None:
    """The index of the message this step aligns, or ``None`` (rule: the module doc).

    ``aligned(i)``: whether message ``i`` was aligned already (the adapter's record of it).
    ``warned``: a one-item flag list, so an adapter warns once about parallel results.
    """
    if not messages or messages[-1].get("role") != "tool":
        return None
    last = len(messages) - 1
    if aligned(last):
        return None
    if len(messages) > 1 and messages[-2].get("role") == "tool":
        if warned is None or not warned[0]:
            warnings.warn(
                "several tool results follow one assistant turn (parallel tool calls); they "
                "are sent unaligned: append alignment places one new message after what the "
                "server holds; ask the model for one tool call per step to align each",
                ParallelToolResultsWarning,
                stacklevel=3,
            )
            if warned is not None:
                warned[0] = True
        return None
    if policy.tool_names is not None:
        name = _tool_name(messages, messages[last].get("tool_call_id"), last)
        if name not in policy.tool_names:
            return None
    return last


def step_report(result: AssemblyResult, ids: Sequence[object]) -> dict[str, Any]:
    """:func:`placement_report` without ``prompt`` and ``messages`` (the framework holds
    the conversation): built without walking it, so its cost is the new message's."""
    light = replace(result, prompt="", messages=None)
    report = placement_report(light, ids)
    report.pop("prompt", None)
    report.pop("messages", None)
    return report


def align_step(
    target: Target,
    policy: AgentPolicy,
    *,
    messages: Sequence[Mapping[str, Any]],
    index: int,
    records: Sequence[SourceRecord] | None = None,
    ids: Sequence[object] | None = None,
    tools: Sequence[Mapping[str, Any]] = (),
    fix: str = "",
) -> AgentStep | None:
    """Align ``messages[index]`` (a tool result, see :func:`step_index`) after the messages
    before it (OpenAI-style dicts with their real roles). ``records`` and ``ids``: its
    documents and their framework ids (default: its text split, ids ``None``). ``tools``:
    the bound tool schemas; ``fix``: the adapter's own way out, added to a refusal.
    ``None`` when there is nothing to place, or when the conversation holds what the
    step cannot align (a malformed tool call, a control string left in the history: one
    :class:`UnalignedToolResultWarning`, the result sent unaligned). Under
    ``control_tokens="refuse"`` a control string there raises
    :class:`~phaseaware.errors.ControlTokenError` instead (never sent raw), also in a
    conversation it cannot parse (scanned as :func:`neutral_messages` scans it)."""
    message = messages[index]
    text = str(message.get("content") or "")
    if records is None:
        records = split_documents(text, policy.document_separator)
    if ids is None:
        ids = [r.id for r in records]
    plan_target = target
    if policy.tool_schemas == "rendered":
        plan_target = target.with_tools(tools, fix=fix)
    new: dict[str, Any] = {"role": "tool", "content": policy.message_template}
    if policy.tool_role == "user":
        new = {"role": "user", "content": policy.message_template}
    else:
        new["tool_call_id"] = message.get("tool_call_id")
    failed: MessageError | ControlTokenError | None = None
    try:
        result = append_records(
            records,
            target=plan_target,
            sent=model_view(messages[:index], policy.tool_role),
            new=new,
            question=question_of(messages[: index + 1]),
        )
    except (MessageError, ControlTokenError) as exc:
        failed = exc
    if failed is not None:  # outside the handler: a refusal raised here chains nothing
        _unaligned(target, messages[: index + 1], failed)
        return None
    if result is None or result.messages is None:
        return None
    content = str(result.messages[-1]["content"])
    return AgentStep(index=index, content=content, result=result, report=step_report(result, ids))


def _unaligned(
    target: Target, messages: Sequence[Mapping[str, Any]], exc: MessageError | ControlTokenError
) -> None:
    """Warn that the step's result goes out unaligned because of ``exc``, or, under
    ``control_tokens="refuse"``, raise instead when a control string would go out with it.

    Under refuse a :class:`ControlTokenError` is raised as it is when it names the fix
    itself (``suggests_neutralize``), else completed with the policy's. A conversation the
    step cannot parse (a ``MessageError``: a malformed tool call) was never scanned by the
    core, so it is scanned here as the adapters scan it (:func:`neutral_messages`: what
    the model made, malformed calls as they came, and every tool result): a control string
    there raises that path's refusal, naming the field and the fix."""
    refuse = target.options.control_tokens == "refuse"
    if refuse and isinstance(exc, ControlTokenError):
        if exc.suggests_neutralize:
            raise exc  # never sent as a control token: the caller chose "refuse"
        raise ControlTokenError(
            f"{exc}; under control_tokens='refuse' the agent step refuses it rather than "
            "send it unaligned: use control_tokens='neutralize' (the default) to break it",
            suggests_neutralize=True,
        ) from exc
    if refuse:
        neutral_messages(target, messages)  # raises for a control string; else: unaligned
    # the conversation holds what the model made (its tool calls and their arguments):
    # untrusted text that must not stop the agent; this result goes out as it is
    warnings.warn(
        f"a tool result is sent unaligned: {exc}",
        UnalignedToolResultWarning,
        stacklevel=4,
    )
