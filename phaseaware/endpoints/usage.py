"""Checked at the model: compare the server's ``usage.prompt_tokens`` with the plan.

A placement is right only if the server tokenized exactly what phaseaware rendered,
plus a known number of tokens of its own before it (the endpoint's ``offset``: a BOS
the prompt text lacks, a hidden system preamble). After each call, the response's
``usage.prompt_tokens`` must equal ``planned_tokens + offset``. Anything else means
the residues phaseaware reported are not the model's: the server adds text of its
own that was not accounted for, or renders another chat format.

Both framework adapters and ``calibrate`` call :func:`check_prompt_tokens`; it is
pure apart from the warning it may issue.
"""

from __future__ import annotations

import warnings
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Literal

from phaseaware.errors import InputError, PhaseawareWarning, PromptTokenDriftError

__all__ = [
    "ON_MISMATCH",
    "UsageCheck",
    "check_identity",
    "check_prompt_tokens",
    "check_response",
    "reported_prompt_tokens",
]

ON_MISMATCH = ("warn", "raise", "ignore")


@dataclass(frozen=True)
class UsageCheck:
    """One comparison, in tokens. ``drift == 0`` means the plan holds at the model."""

    planned_tokens: int  # tokens of the prompt phaseaware rendered and verified
    offset: int  # tokens the endpoint is known to add before the prompt
    reported_tokens: int  # the server's usage.prompt_tokens
    allowed_offsets: tuple[int, ...] = ()  # a varying endpoint: any of these is fine
    # the caller's parameter that sets the offset (named in the fix: offset=, position_offset=)
    offset_name: str = field(default="position_offset", compare=False)

    @property
    def expected_tokens(self) -> int:
        return self.planned_tokens + self.offset

    @property
    def drift(self) -> int:
        """Tokens the server counted beyond (or, negative, short of) the expectation."""
        return self.reported_tokens - self.expected_tokens

    @property
    def ok(self) -> bool:
        if self.allowed_offsets:
            return self.observed_offset in self.allowed_offsets
        return self.drift == 0

    @property
    def observed_offset(self) -> int:
        """The offset that would explain this count (``reported - planned``)."""
        return self.reported_tokens - self.planned_tokens

    def message(self) -> str:
        """What differed, the likely cause and the fix, in one line."""
        cause = (
            "the server adds text of its own before or around the prompt (a hidden system "
            "prompt, a date line, a BOS)"
            if self.drift > 0
            else "the server renders another chat format or drops text phaseaware sent"
        )
        known = (
            f"offset one of {list(self.allowed_offsets)}"
            if self.allowed_offsets
            else f"offset {self.offset} = {self.expected_tokens}"
        )
        return (
            f"the server counted {self.reported_tokens} prompt tokens, phaseaware planned "
            f"{self.planned_tokens} + {known} "
            f"(drift {self.drift:+d}): {cause}, so the reported residues are not the model's; "
            f"run `phaseaware probe-endpoint` and pass its record, or set {self.offset_name}="
            f"{self.observed_offset}"
            + ("" if self.observed_offset >= 0 else " (impossible: check the chat format)")
        )


def _count(name: str, value: object, *, minimum: int) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or value < minimum:
        raise InputError(f"{name} must be an integer >= {minimum}, got {value!r}")
    return value


def check_prompt_tokens(
    *,
    planned_tokens: int,
    reported_tokens: int,
    offset: int = 0,
    on_mismatch: Literal["warn", "raise", "ignore"] = "warn",
    offsets: Sequence[int] | None = None,
    offset_name: str = "position_offset",
) -> UsageCheck:
    """Compare ``reported_tokens`` (usage.prompt_tokens) with ``planned_tokens + offset``.

    ``offsets``: for an endpoint whose offset varies over a known set (a record
    with ``stability == "varying"``), any offset in the set is accepted; the
    message then names the one observed (the new offset to probe or pass).

    ``on_mismatch``: ``"warn"`` issues a :class:`PhaseawareWarning`, ``"raise"``
    raises :class:`PromptTokenDriftError`, ``"ignore"`` only returns the check.
    ``offset_name``: the caller's parameter for the offset, named in the message's fix.
    """
    if on_mismatch not in ON_MISMATCH:
        raise InputError(
            f"on_mismatch must be one of {', '.join(ON_MISMATCH)}, got {on_mismatch!r}"
        )
    check = UsageCheck(
        planned_tokens=_count("planned_tokens", planned_tokens, minimum=0),
        offset=_count("offset", offset, minimum=0),
        reported_tokens=_count("reported_tokens", reported_tokens, minimum=0),
        allowed_offsets=tuple(
            sorted({_count("offsets[]", d, minimum=0) for d in offsets}) if offsets else ()
        ),
        offset_name=offset_name,
    )
    if not check.ok:
        if on_mismatch == "raise":
            raise PromptTokenDriftError(check.message())
        if on_mismatch == "warn":
            warnings.warn(check.message(), PhaseawareWarning, stacklevel=2)
    return check


def reported_prompt_tokens(response: Any) -> int | None:
    """``usage.prompt_tokens`` of an openai response object or a mapping (None if absent)."""
    usage = (
        response.get("usage") if isinstance(response, Mapping) else getattr(response, "usage", None)
    )
    value = (
        usage.get("prompt_tokens")
        if isinstance(usage, Mapping)
        else getattr(usage, "prompt_tokens", None)
    )
    return value if isinstance(value, int) and not isinstance(value, bool) else None


def _field(response: Any, name: str) -> str | None:
    value = response.get(name) if isinstance(response, Mapping) else getattr(response, name, None)
    return value if isinstance(value, str) and value else None


def check_identity(response: Any, *, model: str | None, system_fingerprint: str | None) -> bool:
    """Warn (``PhaseawareWarning``) when the response's ``model`` or ``system_fingerprint``
    differs from the endpoint record's; True when they agree (or either side is unknown).

    A changed identity means the served checkpoint changed (a hosted alias moved to a
    new model, a redeploy): offsets and reliabilities measured before may not hold.
    """
    changed = [
        f"{name} {old!r} -> {new!r}"
        for name, old in (("model", model), ("system_fingerprint", system_fingerprint))
        if old is not None and (new := _field(response, name)) is not None and new != old
    ]
    if changed:
        warnings.warn(
            f"the served checkpoint changed ({'; '.join(changed)}): re-probe "
            "(`phaseaware probe-endpoint`) and recalibrate before trusting placements",
            PhaseawareWarning,
            stacklevel=3,
        )
    return not changed


def check_response(
    response: Any,
    *,
    planned_tokens: int,
    offset: int = 0,
    offsets: Sequence[int] | None = None,
    on_mismatch: Literal["warn", "raise", "ignore"] = "warn",
    model: str | None = None,
    system_fingerprint: str | None = None,
) -> UsageCheck | None:
    """:func:`check_prompt_tokens` on a response's ``usage.prompt_tokens``; ``None`` when
    the server reports no usage (nothing to verify). ``model`` / ``system_fingerprint``:
    the identity an endpoint record holds (``served_model``, ``system_fingerprint``); a
    response that reports another gets a warning (:func:`check_identity`)."""
    if on_mismatch != "ignore":
        check_identity(response, model=model, system_fingerprint=system_fingerprint)
    reported = reported_prompt_tokens(response)
    if reported is None:
        return None
    return check_prompt_tokens(
        planned_tokens=planned_tokens, reported_tokens=reported, offset=offset,
        on_mismatch=on_mismatch, offsets=offsets,
    )  # fmt: skip
