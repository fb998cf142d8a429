"""One average over server offsets, one position shift: the conventions they keep."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from phaseaware.assembly.plan.reliability import offset_mean, weighted_accuracy
from phaseaware.assembly.report.result import (
    AssemblyResult,
    Dropped,
    DroppedAfterMerge,
    Placement,
    RepeatPlacement,
    shift_positions,
)


@given(
    reliability=st.lists(st.floats(0, 1), min_size=1, max_size=16),
    offsets=st.lists(st.integers(0, 40), min_size=1, max_size=5),
)
def test_offset_mean_is_indexed_by_prompt_residue(
    reliability: list[float], offsets: list[int]
) -> None:
    period = len(reliability)
    got = offset_mean(reliability, offsets=offsets)
    for r in range(period):  # prompt residue r reads model residue (r + d) mod period
        expected = sum(reliability[(r + d) % period] for d in offsets) / len(offsets)
        assert got[r] == expected
    assert offset_mean(reliability, offsets=[offsets[0]]) == [
        reliability[(r + offsets[0]) % period] for r in range(period)
    ]


def test_weighted_accuracy_counts_missing_keyed_chunks_as_zero() -> None:
    got = weighted_accuracy(weights=[1.0, 0.5, 1.0], keyed=[True, True, False], accuracy={0: 0.9})
    assert got == (0.9 * 1.0 + 0.0 * 0.5) / 1.5
    assert weighted_accuracy(weights=[1.0], keyed=[False], accuracy={}) is None


def _result() -> AssemblyResult:
    placement = Placement(
        segment_char_start=3, chunk_id="a", order=0, rank=0, score=1.0, token_start=2,
        token_end=5, char_start=4, char_end=9, padding_tokens=0, key_token_positions=(3,),
        key_char_offsets=(6,), residues=(3,), expected_accuracy=0.9,
    )  # fmt: skip
    repeat = RepeatPlacement(
        chunk_id="a", text="x", token_start=7, token_end=8, key_token_positions=(7,),
        key_char_offsets=(12,), residues=(7,), expected_accuracy=0.9,
    )  # fmt: skip
    return AssemblyResult(
        prompt="p" * 14, messages=None, context="c", token_count=9, placements=(placement,),
        repeat=repeat, padding_tokens=0, end_padding_tokens=0, repeated_tokens=1,
        dropped=(DroppedAfterMerge("b", "over budget"),), expected_accuracy=0.9,
        naive_expected_accuracy=0.5, profile=None, period=None, length_residue=None,
        tokenizer="t", fingerprint="f", chat_format="none",
    )  # fmt: skip


def test_shift_positions_moves_tokens_and_chars_only() -> None:
    result = _result()
    moved = shift_positions(result, tokens=10, chars=100)
    p, q = moved.placements[0], result.placements[0]
    assert (p.token_start, p.token_end, p.key_token_positions) == (12, 15, (13,))
    assert (p.char_start, p.char_end, p.segment_char_start, p.key_char_offsets) == (
        104, 109, 103, (106,),
    )  # fmt: skip
    assert p.residues == q.residues and p.expected_accuracy == q.expected_accuracy
    assert moved.repeat is not None and moved.repeat.key_token_positions == (17,)
    assert moved.repeat.key_char_offsets == (112,) and moved.token_count == 19
    tokens_only = shift_positions(result, tokens=4)
    assert tokens_only.placements[0].char_start == q.char_start
    assert tokens_only.placements[0].token_start == q.token_start + 4


def test_a_drop_after_a_merge_is_a_type_and_serialises_as_a_drop() -> None:
    result = _result()
    assert isinstance(result.dropped[0], DroppedAfterMerge)
    assert isinstance(result.dropped[0], Dropped)
    assert result.to_dict()["dropped"] == [{"chunk_id": "b", "reason": "over budget"}]
