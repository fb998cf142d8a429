"""Options and results of ``phaseaware.assembly.assemble`` (frozen, JSON-ready).

``build_result`` turns a confirmed plan plus the *measured* tokenization of the
final prompt into an ``AssemblyResult``; every position it reports comes from
that tokenization. ``naive_expected_accuracy`` is the baseline of the same
chunks in the given order, no padding, no repeat, same budget; its positions
are estimated from the in-context per-chunk token counts (the naive prompt is not rendered).
"""

from __future__ import annotations

import bisect
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from phaseaware import planner
from phaseaware.errors import InputError
from phaseaware.filler import CHUNK_SEPARATOR

if TYPE_CHECKING:  # pragma: no cover
    from phaseaware.tokenizers.base import TokenizedText

__all__ = [
    "AssemblyOptions",
    "Placement",
    "RepeatPlacement",
    "AssemblyResult",
    "build_result",
]


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

    def __post_init__(self) -> None:
        for name in ("pad", "repeat", "length_pad", "allow_tokenizer_mismatch"):
            if not isinstance(getattr(self, name), bool):
                raise InputError(
                    f"options.{name} must be true or false, got {getattr(self, name)!r}"
                )
        for name in (
            "max_keys_per_chunk",
            "repeat_max_chars",
            "max_repair_rounds",
            "position_offset",
        ):
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, int):
                raise InputError(f"options.{name} must be an integer, got {value!r}")
        if isinstance(self.pad_cost, bool) or not isinstance(self.pad_cost, int | float):
            raise InputError(f"options.pad_cost must be a number, got {self.pad_cost!r}")
        if not isinstance(self.repeat_label, str):
            raise InputError(f"options.repeat_label must be a string, got {self.repeat_label!r}")
        if not isinstance(self.strategy, str) or self.strategy not in planner.STRATEGIES:
            raise InputError(
                f"options.strategy={self.strategy!r} is unknown; use one of "
                f"{', '.join(planner.STRATEGIES)}"
            )
        if not self.pad_cost >= 0:
            raise InputError(f"options.pad_cost must be >= 0, got {self.pad_cost!r}")
        for name in ("max_keys_per_chunk", "repeat_max_chars"):
            if getattr(self, name) < 1:
                raise InputError(f"options.{name} must be >= 1, got {getattr(self, name)!r}")
        if self.position_offset < 0:
            raise InputError(
                f"options.position_offset must be >= 0 (tokens the server adds before the "
                f"prompt, e.g. 1 for a BOS), got {self.position_offset}"
            )
        if self.max_repair_rounds < 0:
            raise InputError(
                f"options.max_repair_rounds must be >= 0, got {self.max_repair_rounds}"
            )
        if self.period is not None and (
            isinstance(self.period, bool) or not isinstance(self.period, int) or self.period < 1
        ):
            raise InputError(f"options.period must be an int >= 1, got {self.period!r}")


@dataclass(frozen=True)
class Placement:
    """Where one admitted chunk landed (measured). Token spans are ``[start, end)``."""

    chunk_id: str
    order: int  # 0 = first chunk in the context
    rank: int  # 0 = most relevant chunk of the input
    score: float
    token_start: int
    token_end: int
    char_start: int  # in the prompt
    char_end: int
    padding_tokens: int  # filler tokens right before this chunk
    key_token_positions: tuple[int, ...]
    key_char_offsets: tuple[int, ...]  # token at key_token_positions[j] contains this char
    residues: tuple[int, ...]  # (key_token_positions + position_offset) mod period

    expected_accuracy: float | None  # mean over keys (max with its repeat); None: no keys


@dataclass(frozen=True)
class RepeatPlacement:
    """The restated evidence block before the question (measured)."""

    chunk_id: str
    text: str
    token_start: int
    token_end: int
    key_token_positions: tuple[int, ...]
    key_char_offsets: tuple[int, ...]
    residues: tuple[int, ...]
    expected_accuracy: float | None


@dataclass(frozen=True)
class Dropped:
    chunk_id: str
    reason: str


@dataclass(frozen=True)
class AssemblyResult:
    """The assembled prompt and its measured placements."""

    prompt: str  # the full text the tokenizer sees, template included
    messages: tuple[dict[str, str], ...] | None  # chat layouts; None for "none"
    context: str
    token_count: int
    placements: tuple[Placement, ...]  # context order
    repeat: RepeatPlacement | None
    padding_tokens: int  # all filler tokens (before chunks + end pad)
    end_padding_tokens: int
    repeated_tokens: int
    dropped: tuple[Dropped, ...]  # input order
    expected_accuracy: float | None
    naive_expected_accuracy: float | None
    profile: str | None
    period: int | None
    length_residue: int | None  # (token_count + offset) mod the profile's length-effect period
    tokenizer: str
    fingerprint: str
    layout: str
    position_offset: int = 0  # tokens the server adds before the prompt (options)

    def to_dict(self) -> dict[str, Any]:
        """Plain JSON-ready dict (lists, not tuples), stable key order."""
        return _plain(self)


def _plain(value: Any) -> Any:
    if hasattr(value, "__dataclass_fields__"):
        return {name: _plain(getattr(value, name)) for name in value.__dataclass_fields__}
    if isinstance(value, tuple | list):
        return [_plain(v) for v in value]
    if isinstance(value, dict):
        return {k: _plain(v) for k, v in value.items()}
    return value


def _tokens_in(measured: TokenizedText, start: int, end: int) -> int:
    """Tokens whose first character lies in prompt chars ``[start, end)``."""
    return bisect.bisect_left(measured.starts, end) - bisect.bisect_left(measured.starts, start)


def _residues(positions: tuple[int, ...], period: int | None, offset: int) -> tuple[int, ...]:
    """Residues of the model's positions (prompt index + offset); () without a period."""
    return tuple((t + offset) % period for t in positions) if period else ()


def _mean(values: list[float]) -> float | None:
    return sum(values) / len(values) if values else None


def build_result(setup, plan, rendered, measured, rendered_prompt, dropped) -> AssemblyResult:
    """Measured placements of a confirmed plan (``plan`` None: no chunk admitted)."""
    from phaseaware.assembly import _position_reliability

    length = len(measured)
    profile = setup.profile
    period = profile.period if profile is not None else setup.options.period
    shift = setup.options.position_offset  # model position = prompt token index + shift
    rel = _position_reliability(profile, length, shift)
    prep = setup.prepared
    ranks = {i: r for r, i in enumerate(planner.relevance_rank([p.chunk.score for p in prep]))}
    offset = len(setup.prefix)
    placements: list[Placement] = []
    accuracy: dict[int, float | None] = {}
    padding = end_padding = repeated = 0
    repeat = None
    if plan is not None:
        repeat = _repeat_placement(setup, plan, rendered, measured, rel, period)
        pads = iter(rendered.pad_spans)
        for j, (i, k) in enumerate(zip(plan.order, plan.pads, strict=True)):
            pad_tokens = _tokens_in(measured, *(offset + c for c in next(pads))) if k else 0
            padding += pad_tokens
            floor = None  # the repeat lifts its chunk's accuracy to at least its own
            if repeat is not None and i == plan.repeat.index:
                floor = repeat.expected_accuracy or 0.0
            placement = _placement(
                setup, measured, rel, period, j, i, rendered, ranks[i], pad_tokens, floor
            )
            accuracy[i] = placement.expected_accuracy
            placements.append(placement)
        if rendered.end_span is not None:
            end_padding = _tokens_in(measured, *(offset + c for c in rendered.end_span))
            padding += end_padding
        if repeat is not None:
            start = offset + rendered.repeat_start - len(CHUNK_SEPARATOR)
            repeated = _tokens_in(
                measured, start, offset + rendered.repeat_start + len(plan.repeat.text)
            )
    effect = profile.length_residue_accuracy if profile is not None else None
    return AssemblyResult(
        prompt=rendered_prompt.text,
        messages=rendered_prompt.messages,
        context=rendered.context if rendered is not None else "",
        token_count=length,
        placements=tuple(placements),
        repeat=repeat,
        padding_tokens=padding,
        end_padding_tokens=end_padding,
        repeated_tokens=repeated,
        dropped=tuple(Dropped(prep[i].chunk.id, reason) for i, reason in sorted(dropped.items())),
        expected_accuracy=_overall(setup, accuracy),
        naive_expected_accuracy=_naive(setup),
        profile=profile.model if profile is not None else None,
        period=period,
        length_residue=(length + shift) % effect.period if effect is not None else None,
        tokenizer=setup.tokenizer.spec,
        fingerprint=setup.tokenizer.fingerprint(),
        layout=setup.layout.name,
        position_offset=shift,
    )


def _placement(
    setup, measured, rel, period, order, i, rendered, rank, pad_tokens: int, floor: float | None
) -> Placement:
    """Measured placement of ordered chunk ``order``; accuracy at least ``floor`` (if any)."""
    prep = setup.prepared[i]
    start = len(setup.prefix) + rendered.chunk_starts[order]
    end = start + len(prep.chunk.text)
    chars = tuple(start + c for c in prep.key_chars)
    positions = tuple(measured.token_at_char(c) for c in chars)
    span = measured.token_span(start, end)
    accuracy = _mean([rel(t) for t in positions])
    if floor is not None and accuracy is not None:
        accuracy = max(accuracy, floor)
    return Placement(
        chunk_id=prep.chunk.id,
        order=order,
        rank=rank,
        score=prep.chunk.score,
        token_start=span[0],
        token_end=span[1],
        char_start=start,
        char_end=end,
        padding_tokens=pad_tokens,
        key_token_positions=positions,
        key_char_offsets=chars,
        residues=_residues(positions, period, setup.options.position_offset),
        expected_accuracy=accuracy,
    )


def _repeat_placement(setup, plan, rendered, measured, rel, period) -> RepeatPlacement | None:
    if plan.repeat is None:
        return None
    start = len(setup.prefix) + rendered.repeat_start
    end = start + len(plan.repeat.text)
    chars = tuple(start + c for c in plan.repeat.key_chars)
    positions = tuple(measured.token_at_char(c) for c in chars)
    span = measured.token_span(start, end)
    return RepeatPlacement(
        chunk_id=setup.prepared[plan.repeat.index].chunk.id,
        text=plan.repeat.text,
        token_start=span[0],
        token_end=span[1],
        key_token_positions=positions,
        key_char_offsets=chars,
        residues=_residues(positions, period, setup.options.position_offset),
        expected_accuracy=_mean([rel(t) for t in positions]),
    )


def _overall(setup, accuracy: dict[int, float | None]) -> float | None:
    """Relevance-weighted mean accuracy over keyed, non-empty chunks (dropped → 0)."""
    total = weight_sum = 0.0
    for i, prep in enumerate(setup.prepared):
        if prep.empty or not prep.key_chars:
            continue
        weight_sum += setup.weights[i]
        total += setup.weights[i] * (accuracy.get(i) or 0.0)
    return total / weight_sum if weight_sum > 0 else None


def _naive(setup) -> float | None:
    """Same chunks, given order, no padding or repeat, same budget (estimated positions)."""
    from phaseaware.assembly import _position_reliability

    prep = setup.prepared
    admission = planner.admit(
        scores=[p.chunk.score for p in prep],
        costs=[p.tokens for p in prep],
        empty=[p.empty for p in prep],
        budget_left=setup.budget - setup.n_prefix - setup.n_suffix,
        in_given_order=True,
    )
    positions: dict[int, list[int]] = {}
    pos = setup.n_prefix
    for i in admission.admitted:
        positions[i] = [pos + t for t in prep[i].key_tokens]
        pos += prep[i].tokens
    rel = _position_reliability(
        setup.profile,
        max(1, pos - setup.sep_tokens + setup.n_suffix),
        setup.options.position_offset,
    )
    return _overall(setup, {i: _mean([rel(t) for t in ts]) for i, ts in positions.items()})
