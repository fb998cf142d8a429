"""What an adapter checks: its arguments once, and each response's prompt token count.

Framework-free: adapters hand in OpenAI-style message dicts, OpenAI tool schemas and what
the response reported. What is expected (the target's offset or offset set), what a
mismatch does and when a response goes unchecked are :func:`check_usage`'s, once.
"""

from __future__ import annotations

import threading
import warnings
from array import array
from collections.abc import (
    AsyncGenerator,
    AsyncIterable,
    Callable,
    Generator,
    Iterable,
    Mapping,
    Sequence,
)
from typing import Any, TypeVar

from phaseaware.assembly.prepare.render import CHUNK_SEPARATOR
from phaseaware.chat.errors import MessageError
from phaseaware.endpoints import (
    UsageCheck,
    check_prompt_ids,
    reported_prompt_ids,
    reported_prompt_tokens,
)
from phaseaware.errors import InputError, PhaseawareWarning
from phaseaware.integrate.agent import TOOL_SCHEMA_POLICIES, ToolSchemas
from phaseaware.integrate.calls import (
    OnMismatch,
    check_on_mismatch,
    check_usage,
    rendered_ids,
    reported_identity,
)
from phaseaware.integrate.target import Target

__all__ = [
    "UsagePlans",
    "check_fixed_prompt",
    "check_raw_usage",
    "check_tool_schemas",
    "require_chat",
    "then_last",
    "then_last_async",
    "tools_fix",
]

_T = TypeVar("_T")


def tools_fix(adapter: str, *, verified: bool = True) -> str:
    """The fix an adapter's bound-tools refusal names (its own ``tool_schemas`` parameter);
    ``verified``: whether the adapter's usage check confirms it (not the check itself)."""
    verifies = " (the usage check verifies it)" if verified else ""
    return (
        f"; or pass tool_schemas='not_rendered' to {adapter} if the server writes no tool "
        f"schemas into the prompt{verifies}"
    )


def check_tool_schemas(value: object) -> ToolSchemas:
    """``value`` if it is ``"rendered"`` or ``"not_rendered"``; else ``InputError``."""
    if value not in TOOL_SCHEMA_POLICIES:
        raise InputError(f"tool_schemas must be 'rendered' or 'not_rendered', got {value!r}")
    return value  # type: ignore[return-value]


def require_chat(target: Target, *, who: str = "an agent sends messages") -> None:
    """``InputError`` unless the target's chat format renders messages (not ``none``);
    ``who`` says why messages are involved."""
    if not target.require_format().chat:
        raise InputError(
            f"{who}: pass the chat format the server renders them with "
            "(deepseek-v4, chatml, hf), not 'none'"
        )


def check_fixed_prompt(
    *,
    prefix: str | None,
    prefix_tokens: int | None,
    separator: str,
    chunk_separator: str = CHUNK_SEPARATOR,
) -> None:
    """A caller that sees no messages states the text around the documents: exactly one of
    ``prefix`` / ``prefix_tokens``, and phaseaware's own separator (else not exact)."""
    if (prefix is None) == (prefix_tokens is None):
        raise InputError(
            "pass exactly one of prefix= (the prompt text before the documents) and "
            f"prefix_tokens= (its token count); got prefix={prefix!r}, "
            f"prefix_tokens={prefix_tokens!r}"
        )
    if separator != chunk_separator:
        raise InputError(
            f"separator={separator!r} cannot be exact: phaseaware joins documents with "
            f"{chunk_separator!r}; use document_separator={chunk_separator!r} in your "
            "stuff-documents step"
        )


def check_raw_usage(
    target: Target,
    *,
    planned_tokens: int,
    raw: Any,
    on_mismatch: OnMismatch,
    reported_tokens: int | None = None,
    planned_ids: Callable[[], Sequence[int]] | None = None,
    count_only_reason: str = "",
) -> UsageCheck | None:
    """:func:`check_usage` on an OpenAI-style raw response (an ``openai`` object or a
    mapping): its ``usage.prompt_tokens`` (else ``reported_tokens``), model and fingerprint.
    Where the response carries the prompt's ids (the request asked: :meth:`Target.
    request_kwargs` with ``prompt_ids=True``) they are compared with ``planned_ids()``
    (called only then), id for id: a mismatch names the first differing position.
    ``count_only_reason``: why the ids could not be compared, for a check that falls back
    to the count (:attr:`UsageCheck.count_only_reason`; ignored where ids are compared)."""
    served_model, fingerprint = reported_identity(raw)
    server_ids = reported_prompt_ids(raw) if planned_ids is not None else None
    if planned_ids is not None and server_ids is not None:
        check_usage(  # the served identity (no count: the ids decide)
            target, planned_tokens=planned_tokens, reported_tokens=None,
            on_mismatch=on_mismatch, served_model=served_model, system_fingerprint=fingerprint,
        )  # fmt: skip
        expected, offsets = target.usage_offsets
        return check_prompt_ids(
            planned_ids=planned_ids(), reported_ids=server_ids, offset=expected,
            offsets=offsets, on_mismatch=on_mismatch,
        )  # fmt: skip
    reported = reported_prompt_tokens(raw)
    return check_usage(
        target,
        planned_tokens=planned_tokens,
        reported_tokens=reported if reported is not None else reported_tokens,
        on_mismatch=on_mismatch,
        served_model=served_model,
        system_fingerprint=fingerprint,
        count_only_reason=count_only_reason,
    )


class UsagePlans:
    """Usage checks for a callback that sees a model call's start and end apart.

    :meth:`start` renders the messages the model was given (and, with
    ``tool_schemas="rendered"``, the bound tools, as :meth:`Target.with_tools` plans
    them) and keeps their ids under the framework's run id (messages it cannot render, a
    malformed tool call the model made: that call goes unchecked, with one warning naming
    the cause); :meth:`end` checks them
    against the response and forgets them; :meth:`drop` forgets them (an error).
    Nothing carries over between calls. Thread-safe.
    """

    def __init__(
        self,
        target: Target,
        *,
        on_mismatch: object = "warn",
        tool_schemas: object = "rendered",
        fix: str = "",
        on_check: Callable[[UsageCheck], None] | None = None,
    ) -> None:
        self.target = target
        self.on_mismatch = check_on_mismatch(on_mismatch)
        self.tool_schemas = check_tool_schemas(tool_schemas)
        self.on_check = on_check
        self._fix = fix
        self._planned: dict[object, array[int]] = {}  # 4 bytes an id while the call runs
        self._lock = threading.Lock()

    def __len__(self) -> int:
        """Calls started and not yet ended (their ids are held until then)."""
        return len(self._planned)

    def start(
        self,
        run_id: object,
        messages: Sequence[Mapping[str, Any]],
        tools: Sequence[Mapping[str, Any]] = (),
    ) -> None:
        target = self.target
        if self.tool_schemas == "rendered":
            target = target.with_tools(tools, fix=self._fix)
        try:
            planned = array("i", rendered_ids(target, messages))
        except MessageError as exc:  # what the model made (a malformed call): never stops it
            warnings.warn(
                f"this model call's prompt is not checked: {exc}", PhaseawareWarning, stacklevel=3
            )
            return
        with self._lock:
            self._planned[run_id] = planned

    def drop(self, run_id: object) -> None:
        with self._lock:
            self._planned.pop(run_id, None)

    def end(
        self,
        run_id: object,
        *,
        reported_tokens: int | None,
        served_model: str | None = None,
        system_fingerprint: str | None = None,
        raw: Any = None,
        count_only_reason: str = "",
    ) -> UsageCheck | None:
        """The check of call ``run_id`` (``None``: not started, or nothing reported).
        ``raw``: the reply's OpenAI-style body where the caller has it (e.g. from a
        :class:`~phaseaware.integrate.replies.ReplyStore`); where it carries the prompt's
        ids they are compared id for id (:func:`check_raw_usage`), else the counts.
        ``count_only_reason``: why no ids could be compared (on the check, in its message)."""
        with self._lock:
            planned = self._planned.pop(run_id, None)
        if planned is None:
            return None
        if raw is not None:
            check = check_raw_usage(
                self.target, planned_tokens=len(planned), raw=raw,
                on_mismatch=self.on_mismatch, reported_tokens=reported_tokens,
                planned_ids=planned.tolist, count_only_reason=count_only_reason,
            )  # fmt: skip
        else:
            check = check_usage(
                self.target, planned_tokens=len(planned), reported_tokens=reported_tokens,
                on_mismatch=self.on_mismatch, served_model=served_model,
                system_fingerprint=system_fingerprint, count_only_reason=count_only_reason,
            )  # fmt: skip
        if check is not None and self.on_check is not None:
            self.on_check(check)
        return check


def then_last(items: Iterable[_T], done: Callable[[_T], object]) -> Generator[_T, None, None]:
    """``items`` passed through, then ``done(last item)`` (a stream's usage comes last;
    an empty stream calls nothing)."""
    last: _T | None = None
    for last in items:
        yield last
    if last is not None:
        done(last)


async def then_last_async(
    items: AsyncIterable[_T], done: Callable[[_T], object]
) -> AsyncGenerator[_T, None]:
    """:func:`then_last` for an async stream."""
    last: _T | None = None
    async for last in items:
        yield last
    if last is not None:
        done(last)
