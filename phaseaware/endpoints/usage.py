"""Checked at the model: compare the server's ``usage.prompt_tokens`` with the plan.

A placement is right only if the server tokenized exactly what phaseaware rendered,
plus a known number of tokens of its own before it (the endpoint's ``offset``: a BOS
the prompt text lacks, a hidden system preamble). After each call, the response's
``usage.prompt_tokens`` must equal ``planned_tokens + offset``. Anything else means
the residues phaseaware reported are not the model's: the server adds text of its
own that was not accounted for, or renders another chat format.

Both framework adapters and ``calibrate`` call :func:`check_prompt_tokens`; it is
pure apart from the warning it may issue.

Where the server returns the prompt's token ids, the check compares ids, not only
their count (:func:`check_prompt_ids`, and :func:`check_response` given
``planned_ids``): vLLM sends them for ``return_token_ids: true``
(``ChatCompletionResponse.prompt_token_ids`` in
``vllm/entrypoints/openai/chat_completion/protocol.py``), SGLang for
``return_prompt_token_ids: true`` (the same response field in
``sglang/srt/entrypoints/openai/protocol.py``); :data:`PROMPT_IDS_FIELDS` names the
request field per server. A count can match while the ids differ (``<think>`` for
``</think>``, one effort budget for another); ids cannot.
"""

from __future__ import annotations

import dataclasses
import warnings
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Literal

from phaseaware.endpoints.values import MAX_TOKEN_ID
from phaseaware.errors import InputError, PhaseawareWarning, PromptTokenDriftError

__all__ = [
    "ON_MISMATCH",
    "PROMPT_IDS_FIELDS",
    "PROMPT_IDS_NOT_STREAMED",
    "check_prompt_ids",
    "reported_prompt_ids",
    "UsageCheck",
    "check_identity",
    "check_prompt_tokens",
    "check_response",
    "reported_prompt_tokens",
]

ON_MISMATCH = ("warn", "raise", "ignore")

#: The request field that makes a server return the prompt's token ids, per server
#: (the response carries them as ``prompt_token_ids``).
PROMPT_IDS_FIELDS: dict[str, str] = {
    "vllm": "return_token_ids",
    "sglang": "return_prompt_token_ids",
}

#: The servers that refuse that field on a streaming request. SGLang 0.5.23 answers HTTP 400
#: ("Please set stream=false when using return_prompt_token_ids=true",
#: ``sglang/srt/entrypoints/openai/serving_chat.py``). vLLM 0.32 accepts it there and sends
#: the ids in the first chunk (``vllm/entrypoints/openai/chat_completion/serving.py``).
PROMPT_IDS_NOT_STREAMED: frozenset[str] = frozenset({"sglang"})


@dataclass(frozen=True)
class UsageCheck:
    """One comparison, in tokens. ``drift == 0`` means the plan holds at the model."""

    planned_tokens: int  # tokens of the prompt phaseaware rendered and verified
    offset: int  # tokens the endpoint is known to add before the prompt
    reported_tokens: int  # the server's usage.prompt_tokens
    allowed_offsets: tuple[int, ...] = ()  # a varying endpoint: any of these is fine
    # the caller's parameter that sets the offset (named in the fix: offset=, position_offset=)
    offset_name: str = field(default="position_offset", compare=False)
    # ids compared (the server returned them): the first planned token that differs, or None
    ids_compared: bool = False
    first_difference: int | None = None
    difference: str = field(default="", compare=False)  # the two tokens there, for the message
    # a count-only check: why the ids were not compared ("": they were, or no reason given),
    # so a check that compares less says so (in the result and in its message)
    count_only_reason: str = field(default="", compare=False)

    @property
    def expected_tokens(self) -> int:
        return self.planned_tokens + self.offset

    @property
    def drift(self) -> int:
        """Tokens the server counted beyond (or, negative, short of) the expectation."""
        return self.reported_tokens - self.expected_tokens

    @property
    def ok(self) -> bool:
        if self.first_difference is not None:
            return False
        if self.allowed_offsets:
            return self.observed_offset in self.allowed_offsets
        return self.drift == 0

    @property
    def observed_offset(self) -> int:
        """The offset that would explain this count (``reported - planned``)."""
        return self.reported_tokens - self.planned_tokens

    def message(self) -> str:
        """What differed, the likely cause and the fix, in one line."""
        if self.first_difference is not None:
            return (
                f"the server's prompt token ids differ from phaseaware's at planned token "
                f"{self.first_difference} ({self.difference}) with the counts "
                f"{self.reported_tokens} vs {self.planned_tokens} + offset: the server rendered "
                "other text (chat settings, effort table, template) or tokenized it otherwise, "
                "so the reported residues are not the model's; rerun `phaseaware "
                "probe-endpoint` with the settings the requests send"
            )
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
            + (f" (count only: {self.count_only_reason})" if self.count_only_reason else "")
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
    count_only_reason: str = "",
) -> UsageCheck:
    """Compare ``reported_tokens`` (usage.prompt_tokens) with ``planned_tokens + offset``.

    ``offsets``: for an endpoint whose offset varies over a known set (a record
    with ``stability == "varying"``), any offset in the set is accepted; the
    message then names the one observed (the new offset to probe or pass).

    ``on_mismatch``: ``"warn"`` issues a :class:`PhaseawareWarning`, ``"raise"``
    raises :class:`PromptTokenDriftError`, ``"ignore"`` only returns the check.
    ``offset_name``: the caller's parameter for the offset, named in the message's fix.
    ``count_only_reason``: why the server's ids were not compared, where they were wanted
    (kept on the check, and named in its message).
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
        count_only_reason=count_only_reason,
    )
    if not check.ok:
        if on_mismatch == "raise":
            raise PromptTokenDriftError(check.message())
        if on_mismatch == "warn":
            warnings.warn(check.message(), PhaseawareWarning, stacklevel=2)
    return check


def _extra(obj: Any, name: str) -> Any:
    value = obj.get(name) if isinstance(obj, Mapping) else getattr(obj, name, None)
    if value is None:
        extra = getattr(obj, "model_extra", None)  # openai objects keep extras here
        value = extra.get(name) if isinstance(extra, Mapping) else None
    return value


def reported_prompt_ids(response: Any) -> tuple[int, ...] | None:
    """The response's ``prompt_token_ids`` (an openai object or a mapping; None if absent):
    sent by vLLM (on the response) and SGLang (on its first choice) when the request asks
    (:data:`PROMPT_IDS_FIELDS`)."""
    value = _extra(response, "prompt_token_ids")
    if value is None:
        choices = _extra(response, "choices")
        if isinstance(choices, Sequence) and not isinstance(choices, str) and choices:
            value = _extra(choices[0], "prompt_token_ids")
    if isinstance(value, list) and all(
        type(t) is int and 0 <= t <= MAX_TOKEN_ID for t in value
    ):  # a bool, a negative or a 20-digit "id" is no token id: the list is not used
        return tuple(value)
    return None


def check_prompt_ids(
    *,
    planned_ids: Sequence[int],
    reported_ids: Sequence[int],
    offset: int = 0,
    offsets: Sequence[int] | None = None,
    on_mismatch: Literal["warn", "raise", "ignore"] = "warn",
    offset_name: str = "position_offset",
) -> UsageCheck:
    """Compare the server's prompt token ids with phaseaware's: the count as in
    :func:`check_prompt_tokens`, and the ids after the server's own leading tokens (the
    observed offset) must be phaseaware's, token for token."""
    planned, reported = list(planned_ids), list(reported_ids)
    check = check_prompt_tokens(
        planned_tokens=len(planned), reported_tokens=len(reported), offset=offset,
        on_mismatch="ignore", offsets=offsets, offset_name=offset_name,
    )  # fmt: skip
    lead = max(0, check.observed_offset)
    tail = reported[lead:]
    j = next((i for i, (a, b) in enumerate(zip(planned, tail, strict=False)) if a != b), None)
    if j is None and len(tail) != len(planned):
        j = min(len(tail), len(planned))
    difference = ""
    if j is not None:
        server = f"id {tail[j]}" if j < len(tail) else "(end)"
        ours = f"id {planned[j]}" if j < len(planned) else "(end)"
        difference = f"server {server}, phaseaware {ours}"
    check = dataclasses.replace(check, ids_compared=True, first_difference=j, difference=difference)
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
    return value if type(value) is int and value >= 0 else None  # a bool is no count


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
    planned_ids: Sequence[int] | None = None,
) -> UsageCheck | None:
    """:func:`check_prompt_tokens` on a response's ``usage.prompt_tokens``; ``None`` when
    the server reports no usage (nothing to verify). ``model`` / ``system_fingerprint``:
    the identity an endpoint record holds (``served_model``, ``system_fingerprint``); a
    response that reports another gets a warning (:func:`check_identity`).
    ``planned_ids``: phaseaware's token ids; when the response carries the prompt's ids
    (:func:`reported_prompt_ids`) they are compared (:func:`check_prompt_ids`)."""
    if on_mismatch != "ignore":
        check_identity(response, model=model, system_fingerprint=system_fingerprint)
    server_ids = reported_prompt_ids(response)
    if planned_ids is not None and server_ids is not None:
        return check_prompt_ids(
            planned_ids=planned_ids, reported_ids=server_ids, offset=offset, offsets=offsets,
            on_mismatch=on_mismatch,
        )  # fmt: skip
    reported = reported_prompt_tokens(response)
    if reported is None:
        return None
    return check_prompt_tokens(
        planned_tokens=planned_tokens, reported_tokens=reported, offset=offset,
        on_mismatch=on_mismatch, offsets=offsets,
    )  # fmt: skip
