"""What the model made is untrusted text: control strings in its turns, broken.

An assistant turn the framework resends holds what the model wrote: its text
(``content``), its reasoning (``reasoning_content``, which DeepSeek-V4/V4.1 and many
Jinja templates render) and its tool calls (a function name and JSON arguments). A
control string the model copied there (DeepSeek's ``<｜end▁of▁sentence｜>``,
``<｜User｜>``, ``</think>``, ChatML's ``<|im_end|>``) would reach the server as a real
control token: a forged turn. Before each step the kit breaks every one of them the way
every other untrusted string is broken (:meth:`ControlScanner.clean
<phaseaware.tokenizers.control.ControlScanner.clean>`, the scanner of the target's
tokenizer and chat format, as assembly uses): in the text and the reasoning
(:class:`NeutralText`), in the function name, and in every key and string value of the
decoded arguments, at any depth (:class:`NeutralCall`). The adapter rebuilds the message
as a new object from those values (the framework's own objects are never changed) and
sends that one, whether or not the step aligns anything; the step is planned over it, so
positions stay exact, and per message one :class:`NeutralizedAssistantTextWarning` (text,
reasoning) and one :class:`NeutralizedToolCallWarning` (tool calls) name what was broken.

Left as they are (the step's own path then sends the tool result unaligned with one
:class:`~phaseaware.integrate.UnalignedToolResultWarning`): a call whose arguments are
not a JSON object, a call that is not a mapping, and a call where a broken key would equal
another key of the same object (``<think>`` beside ``<·think>``).

Under ``control_tokens="refuse"`` nothing is broken and nothing is sent raw: a control
string in an assistant turn's text, reasoning, function name or arguments (JSON or not)
raises :class:`~phaseaware.errors.ControlTokenError` naming the field
(``messages[3].content``) and the fix (``control_tokens="neutralize"``, the default,
breaks it), before any request, as for any other untrusted text.

A tool result is untrusted text too: :func:`neutral_result` breaks its control strings the
same way (under ``"refuse"``: refuses it); :func:`neutral_messages` applies it to every
tool message, and :class:`~phaseaware.integrate.results.ResultNeutralizer` to the results
an adapter's step sends unaligned (:mod:`.results`).
"""

from __future__ import annotations

import json
import warnings
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Generic, TypeVar

from phaseaware.chat.formats import markers_of
from phaseaware.errors import PhaseawareWarning
from phaseaware.integrate.agent import SentMemory
from phaseaware.integrate.target import Target
from phaseaware.tokenizers.control import ControlScanner, Neutralized, scanner_for

__all__ = [
    "CallNeutralizer",
    "Rebuilder",
    "NeutralCall",
    "NeutralText",
    "NeutralizedAssistantTextWarning",
    "NeutralizedToolCallWarning",
    "found_text",
    "neutral_calls",
    "neutral_messages",
    "neutral_result",
    "neutral_text",
    "scanner_of",
]

_M = TypeVar("_M")
# one message's entry: (the original, its dict, the scanner, (rebuilt, its dict) or None)
_Made = tuple[_M, object, ControlScanner, tuple[_M, dict[str, Any]] | None]


class NeutralizedToolCallWarning(PhaseawareWarning):
    """Control strings the model wrote into a tool call were broken before sending."""


class NeutralizedAssistantTextWarning(PhaseawareWarning):
    """Control strings the model wrote into its text or reasoning were broken before sending."""


@dataclass(frozen=True)
class NeutralText:
    """The text of one assistant message with its control strings broken: ``content`` and
    ``reasoning_content`` (``None``: that field held none and is unchanged)."""

    content: str | None = None
    reasoning_content: str | None = None


@dataclass(frozen=True)
class NeutralCall:
    """Tool call ``index`` of one assistant message with its control strings broken:
    ``name`` and ``arguments`` (decoded; the adapter serialises them as its client does)."""

    index: int
    name: str
    arguments: dict[str, Any]


def scanner_of(target: Target) -> ControlScanner:
    """The scanner assembly uses for ``target`` (its tokenizer's special strings plus its
    chat format's markers, under ``options.control_tokens``)."""
    markers = markers_of(target.require_format())
    return scanner_for(target.tokenizer, markers=markers, policy=target.options.control_tokens)


class _KeyClash(Exception):
    """A broken argument key equals another key of the same object."""


def _clean(scanner: ControlScanner, value: Any, *, where: str, found: list[Neutralized]) -> Any:
    if isinstance(value, str):
        text, hits = scanner.clean(value, where=where)
        found.extend(hits)
        return text
    if isinstance(value, list):
        return [_clean(scanner, v, where=f"{where}[{k}]", found=found) for k, v in enumerate(value)]
    if isinstance(value, dict):
        out = {}
        for key, v in value.items():
            new_key = _clean(scanner, key, where=f"{where} key {key!r}", found=found)
            if new_key in out:  # breaking it would merge two keys: leave this call as it is
                raise _KeyClash
            out[new_key] = _clean(scanner, v, where=f"{where}.{key}", found=found)
        return out
    return value


def _decoded(arguments: object) -> dict[str, Any] | None:
    if isinstance(arguments, str):
        try:
            arguments = json.loads(arguments)
        except ValueError:
            return None
    return dict(arguments) if isinstance(arguments, Mapping) else None


def neutral_text(
    message: Mapping[str, Any], scanner: ControlScanner, *, where: str
) -> tuple[NeutralText | None, tuple[Neutralized, ...]]:
    """The ``content`` and ``reasoning_content`` of ``message`` (an OpenAI-style assistant
    dict) with each control string broken, and what was broken (``(None, ())``: nothing to
    change, or not an assistant message). Under ``control_tokens="refuse"`` a control
    string there raises :class:`~phaseaware.errors.ControlTokenError` naming the field
    (``{where}.content``) and the fix; else never raises."""
    if message.get("role") != "assistant":
        return None, ()
    fields: dict[str, str] = {}
    found: list[Neutralized] = []
    for key in ("content", "reasoning_content"):
        value = message.get(key)
        if isinstance(value, str) and value:
            text, hits = scanner.clean(value, where=f"{where}.{key}")
            if hits:
                fields[key] = text
                found.extend(hits)
    return (NeutralText(**fields) if fields else None), tuple(found)


def neutral_result(
    message: Mapping[str, Any], scanner: ControlScanner, *, where: str
) -> tuple[NeutralText | None, tuple[Neutralized, ...]]:
    """The ``content`` of ``message`` (an OpenAI-style ``tool`` dict: what a tool returned)
    with each control string broken, as :class:`NeutralText`, and what was broken (``(None,
    ())``: nothing to change, or not a tool result). Under ``control_tokens="refuse"`` a
    control string there raises :class:`~phaseaware.errors.ControlTokenError` naming the
    field (``{where}.content``) and the fix; else never raises."""
    if message.get("role") != "tool":
        return None, ()
    value = message.get("content")
    if not isinstance(value, str) or not value:
        return None, ()
    text, hits = scanner.clean(value, where=f"{where}.content")
    return (NeutralText(content=text) if hits else None), hits


def neutral_calls(
    message: Mapping[str, Any], scanner: ControlScanner, *, where: str
) -> tuple[tuple[NeutralCall, ...], tuple[Neutralized, ...]]:
    """The tool calls of ``message`` (an OpenAI-style dict) that held a control string, with
    each one broken, and what was broken (``((), ())``: nothing to change). Under
    ``control_tokens="refuse"`` a control string in a name or in the arguments (JSON or
    not) raises :class:`~phaseaware.errors.ControlTokenError` naming the field
    (``{where}.tool_calls[0].function.arguments``) and the fix; else never raises for what
    the model made."""
    calls = message.get("tool_calls")
    if not isinstance(calls, list | tuple):
        return (), ()
    out: list[NeutralCall] = []
    found: list[Neutralized] = []
    for k, call in enumerate(calls):
        function = call.get("function") if isinstance(call, Mapping) else None
        name = function.get("name") if isinstance(function, Mapping) else None
        arguments = _decoded(function.get("arguments", "{}")) if function else None
        at = f"{where}.tool_calls[{k}]"
        if not isinstance(name, str) or arguments is None:
            if scanner.policy == "refuse":  # malformed, but never sent with a control string
                _refuse_raw(scanner, function, at=at)
            continue  # malformed: the step sends its result unaligned, naming the cause
        hits: list[Neutralized] = []
        clean_name = _clean(scanner, name, where=f"{at}.function.name", found=hits)
        try:
            clean_args = _clean(scanner, arguments, where=f"{at}.function.arguments", found=hits)
        except _KeyClash:
            continue  # left as it is: the step sends its result unaligned, naming the cause
        if hits:
            found.extend(hits)
            out.append(NeutralCall(index=k, name=clean_name, arguments=clean_args))
    return tuple(out), tuple(found)


def _refuse_raw(scanner: ControlScanner, function: object, *, at: str) -> None:
    """Under ``"refuse"``: raise for a control string in a malformed call's name or raw
    arguments (``scanner.clean`` raises)."""
    if not isinstance(function, Mapping):
        return
    for key in ("name", "arguments"):
        _clean(scanner, function.get(key), where=f"{at}.function.{key}", found=[])


def found_text(found: Sequence[Neutralized]) -> str:
    """What was broken, for a warning: the first three (field, string, offset), and the count."""
    shown = "; ".join(f"{h.where} held {h.text!r} at char {h.offset}" for h in found[:3])
    return shown + (f" ({len(found)} in all)" if len(found) > 3 else "")


def _warn(found: Sequence[Neutralized], *, calls: bool) -> None:
    what = "its tool calls" if calls else "its text or reasoning"
    warnings.warn(
        f"control strings the model wrote into {what} are broken before sending, as in any "
        f"untrusted text: {found_text(found)}; the broken text is sent and the step aligns "
        "over it",
        NeutralizedToolCallWarning if calls else NeutralizedAssistantTextWarning,
        stacklevel=4,
    )


def neutral_messages(
    target: Target, messages: Sequence[Mapping[str, Any]]
) -> tuple[list[dict[str, Any]], tuple[Neutralized, ...]]:
    """OpenAI-style ``messages`` with the control strings of their assistant turns (text,
    reasoning and tool calls) and of their tool results broken (new dicts where something
    changed, arguments re-serialised with ``ensure_ascii=False``), and what was broken.
    Send these, not the originals: the server renders what it is sent. For an adapter (or
    an agent loop) that sends dicts; warns nothing (the caller reports ``found``). Under
    ``control_tokens="refuse"``: raises :class:`~phaseaware.errors.ControlTokenError` for
    the first control string there, naming the message and field
    (``messages[3].content``) and the fix; ``messages`` are never changed."""
    scanner = scanner_of(target)
    out: list[dict[str, Any]] = []
    found: list[Neutralized] = []
    for i, message in enumerate(messages):
        text, text_hits = neutral_text(message, scanner, where=f"messages[{i}]")
        calls, call_hits = neutral_calls(message, scanner, where=f"messages[{i}]")
        result, result_hits = neutral_result(message, scanner, where=f"messages[{i}]")
        new = dict(message)
        for part, hits in ((text, text_hits), (result, result_hits)):
            if part is not None:
                found.extend(hits)
                new.update(_text_fields(part))
        if calls:
            found.extend(call_hits)
            new_calls = [dict(c) for c in message["tool_calls"]]
            for call in calls:
                function = {
                    "name": call.name,
                    "arguments": json.dumps(call.arguments, ensure_ascii=False),
                }
                new_calls[call.index] = {**new_calls[call.index], "function": function}
            new["tool_calls"] = new_calls
        out.append(new)
    return out, tuple(found)


def _text_fields(text: NeutralText) -> dict[str, str]:
    """The fields ``text`` changes, by their message key."""
    fields = {"content": text.content, "reasoning_content": text.reasoning_content}
    return {k: v for k, v in fields.items() if v is not None}


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
