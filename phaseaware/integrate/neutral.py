"""The rule for what the model made and what a tool returned: untrusted text, its control
strings broken, or refused under ``control_tokens="refuse"``.

An assistant turn holds what the model wrote: its text (``content``), its reasoning
(``reasoning_content``, which DeepSeek-V4/V4.1 and many Jinja templates render) and its
tool calls (a function name and JSON arguments). A control string the model copied there
(DeepSeek's ``<｜end▁of▁sentence｜>``, ``<｜User｜>``, ``</think>``, ChatML's
``<|im_end|>``) would reach the server as a real control token: a forged turn. These
functions break every one of them the way every other untrusted string is broken
(:meth:`ControlScanner.clean <phaseaware.tokenizers.control.ControlScanner.clean>`, the
scanner of the target's tokenizer and chat format, as assembly uses): in the text and the
reasoning (:class:`NeutralText`), in the function name, and in every key and string value
of the decoded arguments, at any depth (:class:`NeutralCall`); a tool result's text the
same way (:func:`neutral_result`). :func:`neutral_messages` applies them to a whole
conversation of OpenAI-style dicts; :mod:`.made` and :mod:`.results` rebuild an adapter's
framework messages from them.

Left as they are (the step then sends the tool result unaligned with one
:class:`~phaseaware.integrate.UnalignedToolResultWarning`): a call whose arguments are
not a JSON object, a call that is not a mapping (a bare string, a list) or whose
``function`` is not one, and a call where a broken key would equal another key of the
same object (``<think>`` beside ``<·think>``).

Under ``control_tokens="refuse"`` nothing is broken and nothing is sent raw: a control
string in an assistant turn's text, reasoning or tool calls (well formed or not: a
malformed call is scanned as it came, every string in it at any depth) or in a tool
result raises :class:`~phaseaware.errors.ControlTokenError` naming the field
(``messages[3].content``, ``messages[2].tool_calls[0]``) and the fix
(``control_tokens="neutralize"``, the default, breaks it), before any request, as for any
other untrusted text.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from phaseaware.chat.formats import markers_of
from phaseaware.integrate.target import Target
from phaseaware.tokenizers.control import ControlScanner, Neutralized, scanner_for

__all__ = [
    "NeutralCall",
    "NeutralText",
    "found_text",
    "neutral_calls",
    "neutral_messages",
    "neutral_result",
    "neutral_text",
    "scanner_of",
]


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
    if isinstance(value, list | tuple):
        return [_clean(scanner, v, where=f"{where}[{k}]", found=found) for k, v in enumerate(value)]
    if isinstance(value, Mapping):
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
    each one broken, and what was broken (``((), ())``: nothing to change). A malformed
    call (not a mapping, its ``function`` not one, arguments not a JSON object) is left as
    it is. Under ``control_tokens="refuse"`` a control string in a name or in the
    arguments, or anywhere in a malformed call as it came (a bare string, a list,
    ``tool_calls`` itself not a list), raises :class:`~phaseaware.errors.ControlTokenError`
    naming the field (``{where}.tool_calls[0].function.arguments``,
    ``{where}.tool_calls[0]``) and the fix; else never raises for what the model made."""
    calls = message.get("tool_calls")
    refuse = scanner.policy == "refuse"
    if not isinstance(calls, list | tuple):
        if refuse:  # malformed, but never sent with a control string
            _clean(scanner, calls, where=f"{where}.tool_calls", found=[])
        return (), ()
    out: list[NeutralCall] = []
    found: list[Neutralized] = []
    for k, call in enumerate(calls):
        function = call.get("function") if isinstance(call, Mapping) else None
        if not isinstance(function, Mapping):
            function = None
        name = function.get("name") if function is not None else None
        arguments = _decoded(function.get("arguments", "{}")) if function is not None else None
        at = f"{where}.tool_calls[{k}]"
        if not isinstance(name, str) or arguments is None:
            if refuse:  # malformed, but never sent with a control string: scanned as it came
                _clean(scanner, call, where=at, found=[])
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


def found_text(found: Sequence[Neutralized]) -> str:
    """What was broken, for a warning: the first three (field, string, offset), and the count."""
    shown = "; ".join(f"{h.where} held {h.text!r} at char {h.offset}" for h in found[:3])
    return shown + (f" ({len(found)} in all)" if len(found) > 3 else "")


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
