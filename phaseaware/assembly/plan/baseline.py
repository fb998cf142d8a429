"""The naive baseline a plan is compared with: same chunks, given order, no pads, no repeat.

Pure: token counts in, the admitted chunks and their estimated key positions out; the
report turns positions into reliabilities with the profile.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from phaseaware.assembly.plan.order import admit

__all__ = ["NaiveBaseline", "naive_baseline"]


@dataclass(frozen=True)
class NaiveBaseline:
    """``admitted`` chunks (input order), their key positions (flat, chunk by chunk,
    ``key_counts`` each) and the baseline prompt's ``length`` in tokens."""

    admitted: tuple[int, ...]
    key_positions: tuple[int, ...]
    key_counts: tuple[int, ...]
    length: int


def naive_baseline(
    *,
    scores: Sequence[float],
    sizes: Sequence[int],
    empty: Sequence[bool],
    key_offsets: Sequence[Sequence[int]],
    prefix_tokens: int,
    suffix_tokens: int,
    separator_tokens: int,
    budget: int,
) -> NaiveBaseline:
    """Admit in the given order within ``budget``; estimate keys as ``planner.estimate_keys``
    does (each size includes its trailing separator; the last one's is not in the prompt)."""
    admission = admit(
        scores=scores,
        costs=sizes,
        empty=empty,
        budget_left=budget - prefix_tokens - suffix_tokens,
        in_given_order=True,
    )
    flat: list[int] = []
    pos = prefix_tokens
    for i in admission.admitted:
        flat.extend(pos + t for t in key_offsets[i])
        pos += sizes[i]
    return NaiveBaseline(
        admitted=tuple(admission.admitted),
        key_positions=tuple(flat),
        key_counts=tuple(len(key_offsets[i]) for i in admission.admitted),
        length=max(1, pos - separator_tokens + suffix_tokens),
    )
