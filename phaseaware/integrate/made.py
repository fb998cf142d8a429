"""What the model made is untrusted text: an adapter's assistant messages, rebuilt with their
control strings broken.

Before each step the kit breaks every control string the model wrote into an assistant
turn the framework resends (its text, its reasoning, its tool calls' names and decoded
arguments), by the rule of :mod:`.neutral` (the scanner of the target's tokenizer and
chat format, as assembly uses). :class:`CallNeutralizer` holds an adapter's side of it:
the adapter rebuilds the message as a new object from the :class:`NeutralText` and
:class:`NeutralCall` values (the framework's own objects are never changed) and sends
that one, whether or not the step aligns anything; the step is planned over it, so
positions stay exact, and per message one :class:`NeutralizedAssistantTextWarning` (text,
reasoning) and one :class:`NeutralizedToolCallWarning` (tool calls) name what was broken.
What :mod:`.neutral` leaves as it is (a malformed call) makes the step send its tool
result unaligned with one :class:`~phaseaware.integrate.UnalignedToolResultWarning`.

Under ``control_tokens="refuse"`` nothing is broken and nothing is sent raw: a control
string in an assistant turn's text, reasoning or tool calls (well formed or not) raises
:class:`~phaseaware.errors.ControlTokenError` naming the field (``messages[3].content``)
and the fix (``control_tokens="neutralize"``, the default, breaks it), before any
request, as for any other untrusted text.

A tool result is untrusted text too: :class:`~phaseaware.integrate.results.ResultNeutralizer`
breaks the control strings of the results an adapter's step sends unaligned
(:mod:`.results`), by the same rule.
"""

from __future__ import annotations

import warnings
from collections.abc import Callable, Mapping, Sequence
from typing import Any, Generic, TypeVar

from phaseaware.errors import PhaseawareWarning
from phaseaware.integrate.agent import SentMemory
from phaseaware.integrate.neutral import (
    NeutralCall,
    NeutralText,
    found_text,
    neutral_calls,
    neutral_text,
    scanner_of,
)
from phaseaware.integrate.target import Target
from phaseaware.tokenizers.control import ControlScanner, Neutralized

__all__ = [
    "CallNeutralizer",
    "Rebuilder",
    "NeutralizedAssistantTextWarning",
    "NeutralizedToolCallWarning",
]

_M = TypeVar("_M")
# one message's entry: (the original, its dict, the scanner, (rebuilt, its dict) or None)
_Made = tuple[_M, object, ControlScanner, tuple[_M, dict[str, Any]] | None]


class NeutralizedToolCallWarning(PhaseawareWarning):
    """Control strings the model wrote into a tool call were broken before sending."""


class NeutralizedAssistantTextWarning(PhaseawareWarning):
    """Control strings the model wrote into its text or reasoning were broken before sending."""


def _warn(found: Sequence[Neutralized], *, calls: bool) -> None:
    what = "its tool calls" if calls else "its text or reasoning"
    warnings.warn(
        f"control strings the model wrote into {what} are broken before sending, as in any "
        f"untrusted text: {found_text(found)}; the broken text is sent and the step aligns "
        "over it",
        NeutralizedToolCallWarning if calls else NeutralizedAssistantTextWarning,
        stacklevel=4,
    )


class Rebuilder(Generic[_M]):
    """The loop an adapter's neutralizers share: each framework message ``_M`` of one role
    whose text holds a control string is replaced by a NEW message (``_made``), kept
    (bounded) while the framework resends the original, so every step sends the same
    object and warns once. Subclasses say how one message is made."""

    def __init__(self, *, convert: Callable[[_M, int], dict[str, Any]], max_entries: int) -> None:
        self._convert = convert
        self._memory: SentMemory[_Made[_M]] = SentMemory(max_entries)

    def _made(
        self, scanner: ControlScanner, message: _M, converted: Mapping[str, Any], index: int
    ) -> tuple[_M, dict[str, Any]] | None:
        raise NotImplementedError

    def _replaced(
        self,
        target: Target,
        messages: Sequence[_M],
        dicts: Sequence[dict[str, Any]],
        *,
        role: str,
        keep: int | None,
    ) -> tuple[list[_M], list[dict[str, Any]]]:
        """``messages`` and ``dicts`` with every ``role`` message but ``keep`` replaced by its
        made copy (and that copy's dict) where ``_made`` makes one."""
        scanner = scanner_of(target)
        out, out_dicts = list(messages), list(dicts)
        for i, (message, converted) in enumerate(zip(messages, dicts, strict=True)):
            if i == keep or converted.get("role") != role:
                continue
            key = str(id(message))
            known = self._memory.get(key)
            if not (
                known is not None and known[0] is message
                and known[1] is converted and known[2] is scanner
            ):  # fmt: skip
                known = (message, converted, scanner, self._made(scanner, message, converted, i))
                self._memory.put(key, known)  # the message kept: its id stays unique
            if known[3] is not None:
                out[i], out_dicts[i] = known[3]
        return out, out_dicts

    def clear(self) -> None:
        self._memory.clear()


class CallNeutralizer(Rebuilder[_M]):
    """An adapter's framework messages ``_M`` with model-made control strings broken.

    ``convert(message, index)``: the adapter's OpenAI-style dict of a message;
    ``rebuild(message, calls)``: a NEW message with those :class:`NeutralCall` values in
    place of its calls; ``rebuild_text(message, text)``: a NEW message with the
    :class:`NeutralText` fields in place of its text and reasoning (``None``: that part is
    left as it is, and a step over it sends its tool result unaligned). Each rebuilt message
    is kept (bounded) while the framework resends the original, so every step sends the
    same object, and warns once. Under ``control_tokens="refuse"`` :meth:`neutral` raises
    :class:`~phaseaware.errors.ControlTokenError` instead, naming the message and field.
    """

    def __init__(
        self,
        *,
        convert: Callable[[_M, int], dict[str, Any]],
        rebuild: Callable[[_M, Sequence[NeutralCall]], _M] | None = None,
        rebuild_text: Callable[[_M, NeutralText], _M] | None = None,
        max_entries: int = 4096,
    ) -> None:
        super().__init__(convert=convert, max_entries=max_entries)
        self._rebuild = rebuild
        self._rebuild_text = rebuild_text

    def neutral(
        self, target: Target, messages: Sequence[_M], dicts: Sequence[dict[str, Any]]
    ) -> tuple[list[_M], list[dict[str, Any]]]:
        """(``messages``, ``dicts``) with each assistant message whose text, reasoning or tool
        calls hold a control string replaced by its rebuilt copy (and that copy's dict)."""
        return self._replaced(target, messages, dicts, role="assistant", keep=None)

    def _made(
        self, scanner: ControlScanner, message: _M, converted: Mapping[str, Any], index: int
    ) -> tuple[_M, dict[str, Any]] | None:
        where = f"messages[{index}]"
        text: NeutralText | None = None
        text_hits: tuple[Neutralized, ...] = ()
        refuse = scanner.policy == "refuse"  # checked whatever the adapter rebuilds: raises
        if self._rebuild_text is not None or refuse:
            text, text_hits = neutral_text(converted, scanner, where=where)
        calls: tuple[NeutralCall, ...] = ()
        call_hits: tuple[Neutralized, ...] = ()
        if self._rebuild is not None or refuse:
            calls, call_hits = neutral_calls(converted, scanner, where=where)
        if text is None and not calls:
            return None
        rebuilt = message
        if text is not None and self._rebuild_text is not None:
            rebuilt = self._rebuild_text(rebuilt, text)
            _warn(text_hits, calls=False)
        if calls and self._rebuild is not None:
            rebuilt = self._rebuild(rebuilt, calls)
            _warn(call_hits, calls=True)
        return rebuilt, self._convert(rebuilt, index)
