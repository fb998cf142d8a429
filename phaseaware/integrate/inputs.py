"""A prompt step's input, checked once: its template's variables and the caller's dict.

A framework's prompt template formats every variable but ``{context}``, which the step
writes itself (the kit's :func:`~phaseaware.integrate.conversation` splits it there).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

from phaseaware.chat.errors import MissingSlotError
from phaseaware.errors import InputError

__all__ = ["CONTEXT_VARIABLE", "check_context_variable", "template_inputs"]

CONTEXT_VARIABLE = "context"


def check_context_variable(variables: Iterable[str]) -> None:
    """``MissingSlotError`` unless the template's ``variables`` hold ``context``."""
    names = sorted(variables)
    if CONTEXT_VARIABLE not in names:
        raise MissingSlotError(
            f"the prompt template has no {{context}} variable (its variables: {names}); put "
            "{context} where the retrieved documents go, in a system or human message"
        )


def template_inputs(
    inputs: object, *, variables: Iterable[str], question_key: str, documents_key: str, who: str
) -> dict[str, Any]:
    """The template's variables (``context`` aside) from the caller's ``inputs``, which
    also hold ``question_key`` and ``documents_key``; ``InputError`` naming what is
    missing, or a ``context`` the caller passed (the step ``who`` writes it)."""
    keys = f"{question_key!r}, {documents_key!r}"
    if not isinstance(inputs, Mapping):
        raise InputError(
            f"{who} takes a dict with {keys} and the template's variables, got "
            f"{type(inputs).__name__}"
        )
    needed = set(variables) - {CONTEXT_VARIABLE}
    missing = sorted(needed - set(inputs))
    missing += [k for k in (question_key, documents_key) if k not in inputs and k not in missing]
    if missing:
        raise InputError(
            f"the input lacks {missing}; pass them in the input dict (the template needs "
            f"{sorted(needed)}, plus {keys})"
        )
    if CONTEXT_VARIABLE in inputs:
        raise InputError(
            f"the input holds 'context': {who} writes the context itself; pass the retrieved "
            f"documents as {documents_key!r} instead"
        )
    return {k: v for k, v in inputs.items() if k in needed}
