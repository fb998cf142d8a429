"""Tool results sent unaligned are untrusted text: control strings in them, broken.

The agent step aligns one tool result (:func:`~phaseaware.integrate.step_index`); assembly
breaks the control strings in its documents. Every other tool result goes out as the
framework holds it: parallel results (several after one assistant turn), results of a
tool outside :attr:`~phaseaware.integrate.AgentPolicy.tool_names`, and a result the step
could not align. A control string a tool returned (a web page holding
``<｜end▁of▁sentence｜><｜User｜>``, a file holding ``<|im_end|>``) would reach the server
as a real control token, a forged turn, and every later step would refuse the history
the server holds and send its result unaligned. :class:`ResultNeutralizer` breaks each one
as in any untrusted text (:func:`~phaseaware.integrate.neutral.neutral_result`, the scanner
of the target), in a new message the adapter builds (the framework's own is never
changed) and sends, with one :class:`NeutralizedToolResultWarning` per message naming
what was broken. The result the step aligns is left to assembly (``keep``), so an adapter
finds its documents by the text the tool returned (LlamaIndex's ``NodeRegistry``).

Under ``control_tokens="refuse"`` nothing is broken and nothing is sent raw: a control
string in any tool result raises :class:`~phaseaware.errors.ControlTokenError` naming the
field (``messages[3].content``) and the fix (``control_tokens="neutralize"``, the
default, breaks it), before any request: here for a result sent unaligned, in assembly
(re-raised by :func:`~phaseaware.integrate.align_step`) for the one the step aligns.
"""

from __future__ import annotations

import warnings
from collections.abc import Callable, Mapping, Sequence
from typing import Any, TypeVar

from phaseaware.errors import PhaseawareWarning
from phaseaware.integrate.made import Rebuilder
from phaseaware.integrate.neutral import NeutralText, found_text, neutral_result
from phaseaware.integrate.target import Target
from phaseaware.tokenizers.control import ControlScanner, Neutralized

__all__ = ["NeutralizedToolResultWarning", "ResultNeutralizer"]

_M = TypeVar("_M")


class NeutralizedToolResultWarning(PhaseawareWarning):
    """Control strings in a tool result sent unaligned were broken before sending."""


def _warn(found: Sequence[Neutralized]) -> None:
    warnings.warn(
        f"control strings in a tool result sent unaligned are broken before sending, as in "
        f"any untrusted text: {found_text(found)}; the broken text is sent",
        NeutralizedToolResultWarning,
        stacklevel=4,
    )


class ResultNeutralizer(Rebuilder[_M]):
    """An adapter's framework tool results ``_M`` with control strings broken.

    ``convert(message, index)``: the adapter's OpenAI-style dict of a message;
    ``rebuild(message, text)``: a NEW message whose text is ``text.content`` (the adapter's
    rebuild of an assistant turn's text serves). Each rebuilt message is kept (bounded)
    while the framework resends the original, so every step sends the same object, and
    warns once. Under ``control_tokens="refuse"`` :meth:`neutral` raises
    :class:`~phaseaware.errors.ControlTokenError` instead, naming the message and field.
    """

    def __init__(
        self,
        *,
        convert: Callable[[_M, int], dict[str, Any]],
        rebuild: Callable[[_M, NeutralText], _M],
        max_entries: int = 4096,
    ) -> None:
        super().__init__(convert=convert, max_entries=max_entries)
        self._rebuild = rebuild

    def neutral(
        self,
        target: Target,
        messages: Sequence[_M],
        dicts: Sequence[dict[str, Any]],
        *,
        keep: int | None = None,
    ) -> tuple[list[_M], list[dict[str, Any]]]:
        """(``messages``, ``dicts``) with each tool result whose text holds a control string
        replaced by its rebuilt copy (and that copy's dict), but message ``keep`` (the one
        the step aligns: assembly breaks its documents)."""
        return self._replaced(target, messages, dicts, role="tool", keep=keep)

    def _made(
        self, scanner: ControlScanner, message: _M, converted: Mapping[str, Any], index: int
    ) -> tuple[_M, dict[str, Any]] | None:
        text, found = neutral_result(converted, scanner, where=f"messages[{index}]")
        if text is None:
            return None
        rebuilt = self._rebuild(message, text)
        _warn(found)
        return rebuilt, self._convert(rebuilt, index)
