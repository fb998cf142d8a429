"""What the model made is untrusted text: control strings in its tool calls, broken.

An assistant turn the framework resends holds tool calls the model wrote: a function
name and JSON arguments. A control string the model copied there (DeepSeek's
``<｜tool▁calls▁begin｜>``, ``<think>``, ChatML's ``<|im_start|>``) would reach the
server as a real control token. Before each step the kit breaks every one of them the
way every other untrusted string is broken (:meth:`ControlScanner.clean
<phaseaware.tokenizers.control.ControlScanner.clean>`, the scanner of the target's
tokenizer and chat format, as assembly uses): in the function name, and in every key
and string value of the decoded arguments, at any depth. The adapter rebuilds the
message as a new object from :class:`NeutralCall` values (the framework's own objects
are never changed) and sends that one; the step is planned over it, so positions stay
exact, and one :class:`NeutralizedToolCallWarning` per message names what was broken.

Left as they are (the step's own path then sends the tool result unaligned with one
:class:`~phaseaware.integrate.UnalignedToolResultWarning`): a call whose arguments are
not a JSON object, a call that is not a mapping, a call where a broken key would equal
another key of the same object (``<think>`` beside ``<·think>``), and everything under
``control_tokens="refuse"`` (the model's text is refused there as any other).
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
    "NeutralCall",
    "NeutralizedToolCallWarning",
    "neutral_calls",
    "neutral_messages",
    "scanner_of",
]

_M = TypeVar("_M")
# one message's entry: (the original, its dict, the scanner, (rebuilt, its dict) or None)
_Made = tuple[_M, object, ControlScanner, tuple[_M, dict[str, Any]] | None]


class NeutralizedToolCallWarning(PhaseawareWarning):
    """Control strings the model wrote into a tool call were broken before sending."""


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


def neutral_calls(
    message: Mapping[str, Any], scanner: ControlScanner, *, where: str
) -> tuple[tuple[NeutralCall, ...], tuple[Neutralized, ...]]:
    """The tool calls of ``message`` (an OpenAI-style dict) that held a control string, with
    each one broken, and what was broken (``((), ())``: nothing to change). Never raises
    for what the model made; under ``control_tokens="refuse"`` it changes nothing."""
    calls = message.get("tool_calls")
    if scanner.policy != "neutralize" or not isinstance(calls, list | tuple):
        return (), ()
    out: list[NeutralCall] = []
    found: list[Neutralized] = []
    for k, call in enumerate(calls):
        function = call.get("function") if isinstance(call, Mapping) else None
        name = function.get("name") if isinstance(function, Mapping) else None
        arguments = _decoded(function.get("arguments", "{}")) if function else None
        if not isinstance(name, str) or arguments is None:
            continue  # malformed: the step sends its result unaligned, naming the cause
        at = f"{where}.tool_calls[{k}]"
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


def _warn(found: Sequence[Neutralized]) -> None:
    shown = "; ".join(f"{h.where} held {h.text!r} at char {h.offset}" for h in found[:3])
    more = f" ({len(found)} in all)" if len(found) > 3 else ""
    warnings.warn(
        f"control strings the model wrote into its tool calls are broken before sending, as "
        f"in any untrusted text: {shown}{more}; the step aligns over the broken text",
        NeutralizedToolCallWarning,
        stacklevel=4,
    )


def neutral_messages(
    target: Target, messages: Sequence[Mapping[str, Any]]
) -> tuple[list[dict[str, Any]], tuple[Neutralized, ...]]:
    """OpenAI-style ``messages`` with the control strings in their tool calls broken (new
    dicts where something changed; arguments re-serialised with ``ensure_ascii=False``),
    and what was broken. For an adapter that sends dicts; warns nothing."""
    scanner = scanner_of(target)
    out: list[dict[str, Any]] = []
    found: list[Neutralized] = []
    for i, message in enumerate(messages):
        calls, hits = neutral_calls(message, scanner, where=f"messages[{i}]")
        if not calls:
            out.append(dict(message))
            continue
        found.extend(hits)
        new_calls = [dict(c) for c in message["tool_calls"]]
        for call in calls:
            function = {
                "name": call.name,
                "arguments": json.dumps(call.arguments, ensure_ascii=False),
            }
            new_calls[call.index] = {**new_calls[call.index], "function": function}
        out.append({**message, "tool_calls": new_calls})
    return out, tuple(found)


class CallNeutralizer(Generic[_M]):
    """An adapter's framework messages ``_M`` with model-made control strings broken.

    ``convert(message, index)``: the adapter's OpenAI-style dict of a message;
    ``rebuild(message, calls)``: a NEW message with those :class:`NeutralCall` values in
    place of its calls. Each rebuilt message is kept (bounded) while the framework resends
    the original, so every step sends the same object, and warns once.
    """

    def __init__(
        self,
        *,
        convert: Callable[[_M, int], dict[str, Any]],
        rebuild: Callable[[_M, Sequence[NeutralCall]], _M],
        max_entries: int = 4096,
    ) -> None:
        self._convert = convert
        self._rebuild = rebuild
        self._memory: SentMemory[_Made[_M]] = SentMemory(max_entries)

    def neutral(
        self, target: Target, messages: Sequence[_M], dicts: Sequence[dict[str, Any]]
    ) -> tuple[list[_M], list[dict[str, Any]]]:
        """(``messages``, ``dicts``) with each assistant message whose tool calls hold a
        control string replaced by its rebuilt copy (and that copy's dict)."""
        scanner = scanner_of(target)
        out, out_dicts = list(messages), list(dicts)
        for i, (message, converted) in enumerate(zip(messages, dicts, strict=True)):
            if converted.get("role") != "assistant" or not converted.get("tool_calls"):
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

    def _made(
        self, scanner: ControlScanner, message: _M, converted: Mapping[str, Any], index: int
    ) -> tuple[_M, dict[str, Any]] | None:
        calls, found = neutral_calls(converted, scanner, where=f"messages[{index}]")
        if not calls:
            return None
        rebuilt = self._rebuild(message, calls)
        _warn(found)
        return rebuilt, self._convert(rebuilt, index)

    def clear(self) -> None:
        self._memory.clear()
