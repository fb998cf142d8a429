"""Options of ``assemble``, and the one validator of a position offset.

``check_position_offset`` is THE check for "tokens the serving stack puts before
the prompt's own tokens" (``AssemblyOptions.position_offset``, ``audit_prompt``,
``--prompt-token-offset``): import it rather than writing the check again.
"""

from __future__ import annotations

from dataclasses import dataclass

from phaseaware.assembly.inputs.chunks import DUPLICATE_POLICIES
from phaseaware.assembly.plan.order import STRATEGIES
from phaseaware.errors import InputError, PhaseawareError
from phaseaware.limits import (
    MAX_BUDGET_TOKENS,
    MAX_KEYS_PER_CHUNK,
    MAX_PAD_COST,
    MAX_PERIOD,
    MAX_POSITION_OFFSET,
    MAX_REPAIR_ROUNDS,
    MAX_REPEAT_CHARS,
)
from phaseaware.tokenizers.control import CONTROL_POLICIES

__all__ = [
    "MAX_BUDGET_TOKENS",
    "MAX_PERIOD",
    "MAX_POSITION_OFFSET",
    "AssemblyOptions",
    "check_budget",
    "check_position_offset",
]


def check_position_offset(
    value: object, *, name: str, error: type[PhaseawareError] = InputError
) -> int:
    """``value`` if it is an int in ``[0, MAX_POSITION_OFFSET]``, else ``error`` (default
    ``InputError``) naming ``name``.

    A position offset counts the tokens a server adds before the prompt's
    own tokens (1 for a BOS the prompt text lacks); residues are taken at
    prompt token index + offset.
    """
    if isinstance(value, bool) or not isinstance(value, int):
        raise error(f"{name} must be an integer >= 0, got {value!r}")
    if value < 0:
        raise error(
            f"{name} must be >= 0 (tokens the server adds before the prompt, e.g. 1 for a BOS), "
            f"got {value}"
        )
    if value > MAX_POSITION_OFFSET:
        raise error(
            f"{name} must be at most {MAX_POSITION_OFFSET} tokens (what a server adds before "
            f"the prompt, e.g. 1 for a BOS), got {_short(value)}"
        )
    return value


def check_budget(value: object) -> int:
    """``value`` if it is an int in ``[1, MAX_BUDGET_TOKENS]``, else ``InputError``."""
    if isinstance(value, bool) or not isinstance(value, int) or value < 1:
        raise InputError(f"budget_tokens must be a positive int, got {value!r}")
    if value > MAX_BUDGET_TOKENS:
        raise InputError(
            f"budget_tokens must be at most {MAX_BUDGET_TOKENS} tokens, got {_short(value)}"
        )
    return value


def _short(value: int) -> str:
    """``value`` for a message: a huge integer as its digit count, not 10**29 digits."""
    text = str(value) if value < 10**30 else f"an integer of {len(str(value))} digits"
    return text


@dataclass(frozen=True)
class AssemblyOptions:
    """Knobs of ``assemble``.

    strategy: "reorder" (by position reliability), "relevance" (most relevant
    first) or "none" (given order). pad: steer key tokens onto reliable
    residues with filler. repeat: restate the top evidence right before the
    question. length_pad: move the total length off bad length residues.
    pad_cost: objective cost per padding token (relevance·reliability units).
    period: require the profile to have this period (``PeriodMismatchError``).
    position_offset: tokens the serving stack puts before the prompt's own
    tokens (1 when a server prepends a BOS that the prompt text lacks; what
    ``phaseaware calibrate --prompt-token-offset`` measured with). Residues,
    the length residue and reliabilities are taken at the model's positions,
    prompt token index + offset; reported token positions stay prompt indices.
    control_tokens: "neutralize" (default) breaks every special-token or
    chat-control string in chunk text, evidence, question and system with a
    visible U+00B7 (``<|im_start|>`` -> ``<·|im_start|>``) and lists each in
    ``AssemblyResult.neutralized``; "refuse" raises ``ControlTokenError``.
    offsets: the server's offset is one of these (unknown, or varying between
    requests, e.g. a date line of 1-3 tokens): the chunks are planned for the
    smallest offset and the top evidence is placed in
    copies whose residues differ so that for every offset in the set one copy
    lands on a reliable residue (``assembly.verify.final``); residues are
    then reported per offset only. ``position_offset`` may only be the smallest.
    robust_tolerance: with ``offsets``, a residue is reliable when its
    reliability is within this much of the profile's best residue.
    duplicate_ids: "merge" (default) merges chunks under one id as retrievers
    return them (the best-scored copy kept, listed in
    ``AssemblyResult.merged_duplicates``; differing texts refused); "error"
    refuses any duplicate id (``assembly.inputs.chunks``).
    """

    strategy: str = "reorder"
    pad: bool = True
    repeat: bool = True
    length_pad: bool = True
    pad_cost: float = 0.002
    allow_tokenizer_mismatch: bool = False
    period: int | None = None
    max_keys_per_chunk: int = 8
    repeat_max_chars: int = 300
    repeat_label: str = "Key evidence: "
    max_repair_rounds: int = 3
    position_offset: int = 0
    control_tokens: str = "neutralize"
    offsets: tuple[int, ...] | None = None
    robust_tolerance: float = 0.05
    duplicate_ids: str = "merge"

    def __post_init__(self) -> None:
        for name in ("pad", "repeat", "length_pad", "allow_tokenizer_mismatch"):
            if not isinstance(getattr(self, name), bool):
                raise InputError(
                    f"options.{name} must be true or false, got {getattr(self, name)!r}"
                )
        for name in ("max_keys_per_chunk", "repeat_max_chars", "max_repair_rounds"):
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, int):
                raise InputError(f"options.{name} must be an integer, got {value!r}")
        check_position_offset(self.position_offset, name="options.position_offset")
        if self.offsets is not None:
            object.__setattr__(self, "offsets", _check_offsets(self.offsets, self.position_offset))
        if (
            isinstance(self.robust_tolerance, bool)
            or not isinstance(self.robust_tolerance, int | float)
            or not 0 <= self.robust_tolerance <= 1
        ):
            raise InputError(
                f"options.robust_tolerance must be a number in [0, 1], got {self.robust_tolerance!r}"
            )
        if isinstance(self.pad_cost, bool) or not isinstance(self.pad_cost, int | float):
            raise InputError(f"options.pad_cost must be a number, got {self.pad_cost!r}")
        if not isinstance(self.repeat_label, str):
            raise InputError(f"options.repeat_label must be a string, got {self.repeat_label!r}")
        if self.control_tokens not in CONTROL_POLICIES:
            raise InputError(
                f"options.control_tokens={self.control_tokens!r} is unknown; "
                f"use one of {', '.join(CONTROL_POLICIES)}"
            )
        if self.duplicate_ids not in DUPLICATE_POLICIES:
            raise InputError(
                f"options.duplicate_ids={self.duplicate_ids!r} is unknown; "
                f"use one of {', '.join(DUPLICATE_POLICIES)}"
            )
        if not isinstance(self.strategy, str) or self.strategy not in STRATEGIES:
            raise InputError(
                f"options.strategy={self.strategy!r} is unknown; use one of {', '.join(STRATEGIES)}"
            )
        if not self.pad_cost >= 0:
            raise InputError(f"options.pad_cost must be >= 0, got {self.pad_cost!r}")
        for name, low, high in (
            ("max_keys_per_chunk", 1, MAX_KEYS_PER_CHUNK),
            ("repeat_max_chars", 1, MAX_REPEAT_CHARS),
            ("max_repair_rounds", 0, MAX_REPAIR_ROUNDS),
        ):
            if not low <= getattr(self, name) <= high:
                raise InputError(
                    f"options.{name} must be in [{low}, {high}], got {_short(getattr(self, name))}"
                )
        if not self.pad_cost <= MAX_PAD_COST:  # inf too; compares huge ints without overflow
            raise InputError(
                f"options.pad_cost must be at most {MAX_PAD_COST:g}, got {self.pad_cost!r}"
            )
        if self.period is not None and (
            isinstance(self.period, bool)
            or not isinstance(self.period, int)
            or not 1 <= self.period <= MAX_PERIOD
        ):
            raise InputError(
                f"options.period must be an int in [1, {MAX_PERIOD}], got {self.period!r}"
            )


def _check_offsets(value: object, position_offset: int) -> tuple[int, ...]:
    """``value`` as a sorted tuple of distinct offsets (>= 0), or ``InputError``."""
    if isinstance(value, str) or not isinstance(value, tuple | list) or not value:
        raise InputError(
            f"options.offsets must be a non-empty list of integers >= 0 (e.g. [1, 2, 3]), "
            f"got {value!r}"
        )
    offsets = tuple(sorted({check_position_offset(d, name="options.offsets[]") for d in value}))
    if position_offset and position_offset != offsets[0]:
        raise InputError(
            "options.offsets and options.position_offset exclude each other: put the known "
            f"offset {position_offset} in offsets, or drop offsets"
        )
    return offsets
