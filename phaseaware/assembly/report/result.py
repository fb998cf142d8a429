"""Results of ``phaseaware.assembly.assemble`` (frozen, JSON-ready).

The types only; ``phaseaware.assembly.report.build`` builds them from a confirmed plan
and the measured tokenization of the final prompt.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import Any

from phaseaware.assembly.inputs.chunks import MergedDuplicate
from phaseaware.serialize import to_plain
from phaseaware.tokenizers.control import Neutralized

__all__ = [
    "Placement",
    "RepeatPlacement",
    "Segment",
    "Dropped",
    "DroppedAfterMerge",
    "RobustCopy",
    "RobustReport",
    "AssemblyResult",
    "shift_positions",
]


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
    segment_char_start: int  # in the prompt: where this chunk's pad starts (char_start: no pad)


@dataclass(frozen=True)
class Segment:
    """One admitted chunk as rendered: its pad (if any), then its text verbatim.

    ``text == result.prompt[char_start:char_end]`` (character offsets into the prompt).
    In the context, consecutive segments are separated by ``CHUNK_SEPARATOR``; an
    adapter that hands back one framework object per chunk uses ``text`` as is.
    """

    chunk_id: str
    order: int
    text: str
    char_start: int
    char_end: int
    padding_tokens: int


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
class DroppedAfterMerge(Dropped):
    """Dropped after verification: the measured prompt was over the budget with it
    (tokens merged across chunk boundaries); its reason quotes that budget."""


@dataclass(frozen=True)
class RobustCopy:
    """One copy of the top evidence's key (measured): its residue under each offset."""

    key_token_position: int  # prompt token index
    key_char_offset: int
    residues: tuple[tuple[int, int], ...]  # (offset, (position + offset) mod period)
    added: bool  # False: the chunk itself or its repeat; True: a copy added for robustness


@dataclass(frozen=True)
class RobustReport:
    """Offset-robust placement (``AssemblyOptions.offsets``): claims per offset, none single.

    ``reliable_residues``: residues with reliability >= best - ``tolerance``.
    ``covered``: the offsets under which at least one copy of the top evidence
    lands on a reliable residue (measured on the final tokenization).
    ``accuracy_by_offset``: relevance-weighted expected accuracy under each offset,
    a chunk scored by its best copy; ``worst_case_accuracy`` is their minimum and
    ``single_offset_accuracy`` what the plan expects if the offset is the smallest.
    ``extra_tokens``: tokens the added copies cost.
    """

    offsets: tuple[int, ...]
    tolerance: float
    reliable_residues: tuple[int, ...]
    top_chunk_id: str | None
    copies: tuple[RobustCopy, ...]
    covered: tuple[int, ...]
    accuracy_by_offset: tuple[tuple[int, float | None], ...]
    worst_case_accuracy: float | None
    single_offset_accuracy: float | None
    naive_worst_case_accuracy: float | None
    extra_tokens: int


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
    chat_format: str  # the chat format's name (or the layout's)
    position_offset: int = 0  # tokens the server adds before the prompt (options)
    neutralized: tuple[Neutralized, ...] = ()  # control strings broken in user strings
    tokenizer_mismatch_allowed: bool = False  # profile fingerprint differs; caller opted in
    robust: RobustReport | None = None  # options.offsets: per-offset claims (residues empty)
    # How the final tokenization was confirmed: "windowed" (cached chunk tokens,
    # junctions re-encoded, proven equal: ``assembly.retokenize.windowed``) or "full" (one encode).
    # Not in ``to_dict`` (the JSON report is unchanged by caching).
    verification: str = "full"
    # assemble_append only (else None): "incremental" (the sent prefix's cached tokens
    # re-used, only the tail re-tokenized) or "full"; append_reason says why "full".
    # Not in ``to_dict`` (how it was computed, not what: equal either way).
    append_path: str | None = None
    append_reason: str = ""
    # Leading tokens a server's prefix cache can reuse (longest common prefix of token
    # ids, ``report.prefix``): against this prompt rendered with an empty context (the
    # system prompt and history before the slot), and, for assemble_append only,
    # against the sent conversation (the previous request; None elsewhere).
    unchanged_prefix_tokens: int = 0
    unchanged_sent_tokens: int | None = None
    # Chunks under one id, merged into the best-scored copy (options.duplicate_ids="merge"):
    # input indices of the caller's list; the placements and ``dropped`` name the kept one.
    merged_duplicates: tuple[MergedDuplicate, ...] = ()

    @property
    def segments(self) -> tuple[Segment, ...]:
        """Each admitted chunk's rendered text (pad included), in context order."""
        return tuple(
            Segment(
                chunk_id=p.chunk_id,
                order=p.order,
                text=self.prompt[p.segment_char_start : p.char_end],
                char_start=p.segment_char_start,
                char_end=p.char_end,
                padding_tokens=p.padding_tokens,
            )
            for p in self.placements
        )

    def to_dict(self) -> dict[str, Any]:
        """Plain JSON-ready dict (lists, not tuples), stable key order."""
        plain: dict[str, Any] = to_plain(self)
        plain.pop("verification", None)
        plain.pop("append_path", None)
        plain.pop("append_reason", None)
        if plain.get("robust") is None:  # only with options.offsets
            plain.pop("robust", None)
        if plain.get("unchanged_sent_tokens") is None:  # only for assemble_append
            plain.pop("unchanged_sent_tokens", None)
        return plain


def _moved_placement(span: Placement, tokens: int, chars: int) -> Placement:
    return replace(
        span,
        token_start=span.token_start + tokens,
        token_end=span.token_end + tokens,
        key_token_positions=tuple(t + tokens for t in span.key_token_positions),
        key_char_offsets=tuple(c + chars for c in span.key_char_offsets),
        char_start=span.char_start + chars,
        char_end=span.char_end + chars,
        segment_char_start=span.segment_char_start + chars,
    )


def _moved_repeat(span: RepeatPlacement, tokens: int, chars: int) -> RepeatPlacement:
    return replace(
        span,
        token_start=span.token_start + tokens,
        token_end=span.token_end + tokens,
        key_token_positions=tuple(t + tokens for t in span.key_token_positions),
        key_char_offsets=tuple(c + chars for c in span.key_char_offsets),
    )


def shift_positions(result: AssemblyResult, *, tokens: int, chars: int = 0) -> AssemblyResult:
    """``result`` with every placement's and the repeat's positions moved: token indices
    (and ``token_count``) by ``tokens``, character offsets by ``chars``.

    For a result assembled on the part of a prompt after a head of ``tokens`` tokens and
    ``chars`` characters; the prompt text, residues and accuracies are the caller's to
    set (residues and accuracies already belong to the absolute positions when the part
    was assembled with the head's tokens in its ``position_offset``).
    """
    return replace(
        result,
        placements=tuple(_moved_placement(p, tokens, chars) for p in result.placements),
        repeat=_moved_repeat(result.repeat, tokens, chars) if result.repeat is not None else None,
        token_count=result.token_count + tokens,
    )
