"""Pure planning logic: admission, order, pad choice, length pad, filler, evidence."""

from __future__ import annotations

import pytest

from phaseaware import planner
from phaseaware.chunks import Chunk, normalize_chunks
from phaseaware.errors import InputError
from phaseaware.evidence import evidence_snippet, find_key_chars, question_terms
from phaseaware.filler import PadTable

LINEAR = PadTable(tuple(range(17)))  # k units add k tokens
WEAK_3_7 = (0.44, 0.70, 0.66, 0.30, 0.45, 0.70, 0.64, 0.33)


def residue_rel(t: int, d: int = 10**6) -> float:
    return WEAK_3_7[t % 8]


def window_rel(t: int, d: int) -> float:
    """WEAK_3_7, but 0.5 inside an 8-token raw window (worse than the best residue)."""
    return 0.5 if d <= 8 else WEAK_3_7[t % 8]


def test_admit_by_relevance_with_reasons() -> None:
    adm = planner.admit(
        scores=[0.1, 0.9, 0.5, 0.7],
        costs=[10, 60, 50, 30],
        empty=[False, False, False, True],
        budget_left=100,
    )
    assert adm.admitted == (1, 0)
    assert dict(adm.dropped) == {2: "over budget: needs 50 tokens, 40 left", 3: "empty"}
    assert adm.tokens_used == 70


def test_admit_chunk_longer_than_budget_dropped_not_raised() -> None:
    adm = planner.admit(scores=[1.0], costs=[500], empty=[False], budget_left=100)
    assert adm.admitted == ()
    assert adm.dropped == ((0, "over budget: needs 500 tokens, 100 left"),)


def test_admit_in_given_order() -> None:
    adm = planner.admit(
        scores=[0.1, 0.9],
        costs=[60, 60],
        empty=[False, False],
        budget_left=100,
        in_given_order=True,
    )
    assert adm.admitted == (0,)
    assert adm.dropped == ((1, "over budget: needs 60 tokens, 40 left"),)


def test_order_strategies() -> None:
    scores = [0.2, 0.9, 0.5, 0.7, 0.1]
    admitted = [1, 3, 2, 0, 4]
    assert planner.order_chunks(
        admitted=admitted, scores=scores, strategy="none", has_profile=True
    ) == (0, 1, 2, 3, 4)
    assert planner.order_chunks(
        admitted=admitted, scores=scores, strategy="relevance", has_profile=True
    ) == (1, 3, 2, 0, 4)
    # with a profile the most relevant sits next to the question (last)
    assert planner.order_chunks(
        admitted=admitted, scores=scores, strategy="reorder", has_profile=True
    ) == (4, 0, 2, 3, 1)
    # without: relevance at both ends, least relevant in the middle, top last
    lost = planner.order_chunks(
        admitted=admitted, scores=scores, strategy="reorder", has_profile=False
    )
    assert lost[-1] == 1 and lost[0] == 3 and lost[2] == 4
    with pytest.raises(InputError, match="strategy"):
        planner.order_chunks(admitted=admitted, scores=scores, strategy="magic", has_profile=False)


def test_choose_pads_moves_keys_off_weak_residues() -> None:
    # keys at residues 3 and 7 (weak): one unit moves them to 4 / 0, two to 5 / 1 (best)
    pads = planner.choose_pads(
        key_positions=[(11,), (23,)],
        weights=[1.0, 1.0],
        period=8,
        reliability=residue_rel,
        pad_tables=[LINEAR, LINEAR],
        pad_cost=0.0,
        slack=100,
        length=1000,
    )
    assert pads[0] == 2  # 11 -> 13 (residue 5, 0.70)
    # the second chunk already moved by 2: 23 + 2 = 25 (residue 1, 0.70) -> no pad
    assert pads[1] == 0


def test_choose_pads_respects_cost_slack_and_zero_weight() -> None:
    kw = dict(period=8, reliability=residue_rel, pad_tables=[LINEAR], slack=100, length=1000)
    assert planner.choose_pads(key_positions=[(11,)], weights=[1.0], pad_cost=1.0, **kw) == (0,)
    assert planner.choose_pads(key_positions=[(11,)], weights=[0.0], pad_cost=0.0, **kw) == (0,)
    assert planner.choose_pads(key_positions=[()], weights=[1.0], pad_cost=0.0, **kw) == (0,)
    kw["slack"] = 1
    assert planner.choose_pads(key_positions=[(11,)], weights=[1.0], pad_cost=0.0, **kw) == (1,)


def test_choose_pads_multiple_keys_maximises_sum() -> None:
    # keys 4 apart: residues (r, r+4); best pairs are (1,5) or (5,1) -> 1.40
    pads = planner.choose_pads(
        key_positions=[(16, 20)],
        weights=[1.0],
        period=8,
        reliability=residue_rel,
        pad_tables=[LINEAR],
        pad_cost=0.001,
        slack=100,
        length=1000,
    )
    assert (16 + pads[0]) % 8 == 1


def test_choose_pads_linear_and_deterministic() -> None:
    keys = [(i * 37 + 5,) for i in range(2000)]
    kw = dict(
        key_positions=keys,
        weights=[1.0] * 2000,
        period=8,
        reliability=residue_rel,
        pad_tables=[LINEAR] * 2000,
        pad_cost=0.001,
        slack=10**9,
        length=10**6,
    )
    first = planner.choose_pads(**kw)
    assert first == planner.choose_pads(**kw)
    shift = 0
    for (t,), k in zip(keys, first, strict=True):
        shift += k
        assert WEAK_3_7[(t + shift) % 8] == 0.70


def test_choose_pads_per_chunk_table() -> None:
    # the second chunk cannot be padded (its start merges with filler)
    pads = planner.choose_pads(
        key_positions=[(11,), (19,)],
        weights=[1.0, 1.0],
        period=8,
        reliability=residue_rel,
        pad_tables=[PadTable((0, 2, 3)), PadTable((0,))],
        pad_cost=0.0,
        slack=100,
        length=1000,
    )
    assert pads == (1, 0)


def test_padding_never_moves_a_key_into_the_window() -> None:
    # key 5 tokens from the end of a 100-token prompt: inside the window whatever
    # the pad before it, because the prompt grows with the pad
    kw = dict(period=8, pad_tables=[LINEAR], pad_cost=0.0, slack=100, length=100)
    assert planner.choose_pads(
        key_positions=[(95,)], weights=[1.0], reliability=window_rel, **kw
    ) == (0,)
    # key 12 tokens from the end (outside): a pad cannot bring it closer, so the
    # residue decides (94 -> 97, residue 1)
    pads = planner.choose_pads(key_positions=[(88,)], weights=[1.0], reliability=window_rel, **kw)
    assert (88 + pads[0]) % 8 in (1, 5)
    # with 6 tokens of tail after the last chunk the same key is out of reach of the window
    pads = planner.choose_pads(
        key_positions=[(95,)], weights=[1.0], reliability=window_rel, tail=6, **kw
    )
    assert (95 + pads[0]) % 8 in (1, 5)


def test_later_pad_that_pushes_an_earlier_key_out_of_the_window_is_scored() -> None:
    # chunk 0's key is 4 tokens from the end (inside, 0.5); a pad before chunk 1
    # (whose own key stays inside) pushes it out onto its residue: 98 % 8 = 2
    # (0.66) beats staying inside
    kw = dict(period=8, pad_tables=[LINEAR, LINEAR], slack=100, length=102, window=8)
    pads = planner.choose_pads(
        key_positions=[(98,), (100,)],
        weights=[1.0, 1.0],
        reliability=window_rel,
        pad_cost=0.0,
        **kw,
    )
    assert pads[1] >= 5  # distance 4 + pad > 8
    value = planner.pads_value(
        key_positions=[(98,), (100,)], weights=[1.0, 1.0], reliability=window_rel,
        shifts=[0, pads[1]], length=102,
    )  # fmt: skip
    assert value == pytest.approx(0.66 + 0.5)
    # when leaving the window would land on a weak residue, the pad is not worth it
    pads = planner.choose_pads(
        key_positions=[(99,), (100,)],
        weights=[1.0, 1.0],
        reliability=window_rel,
        pad_cost=0.0,
        **kw,
    )
    assert pads[1] == 0  # 99 % 8 = 3 (0.30) is worse than the window's 0.5


def test_search_orders_tries_every_arrangement_and_keeps_the_last() -> None:
    seen: list[tuple[int, ...]] = []
    target = (2, 0, 1, 3)

    def evaluate(order: tuple[int, ...]) -> float:
        seen.append(order)
        return sum(a == b for a, b in zip(order, target, strict=True))

    assert planner.search_orders(order=(0, 1, 2, 3), evaluate=evaluate) == target
    assert len(seen) == 1 + 6 and all(o[-1] == 3 for o in seen)  # given order, then all 3!
    # ties keep the given order
    assert planner.search_orders(order=(0, 1, 2, 3), evaluate=lambda o: 1.0) == (0, 1, 2, 3)
    assert planner.search_orders(order=(5,), evaluate=lambda o: 1.0) == (5,)


def test_search_orders_leaves_long_lists_alone() -> None:
    calls: list[tuple[int, ...]] = []
    order = tuple(range(8))  # 7! arrangements of the head > 120
    assert planner.search_orders(order=order, evaluate=lambda o: calls.append(o) or 0.0) == order
    assert calls == []


def test_order_scorer_matches_choose_pads() -> None:
    # three chunks of 9, 14 and 5 tokens with keys at 2, (3, 10), 4; the
    # scorer's value for an order equals choose_pads + pads_value on it
    sizes, offsets = [9, 14, 5], [(2,), (3, 10), (4,)]
    weights = [1.0, 0.5, 0.8]
    score = planner.order_scorer(
        start=3, sizes=sizes, key_offsets=offsets, weights=weights,
        residue_reliability=WEAK_3_7, pad_tables=[LINEAR] * 3, pad_cost=0.01,
    )  # fmt: skip
    for order in [(0, 1, 2), (1, 0, 2), (2, 1, 0)]:
        keys, pos = [], 3
        for i in order:
            keys.append(tuple(pos + t for t in offsets[i]))
            pos += sizes[i]
        kw = dict(key_positions=keys, weights=[weights[i] for i in order], length=10**6)
        pads = planner.choose_pads(
            period=8, reliability=residue_rel, pad_tables=[LINEAR] * 3, pad_cost=0.01,
            slack=100, **kw,
        )  # fmt: skip
        value = planner.pads_value(reliability=residue_rel, shifts=list(pads), **kw)
        assert score(order) == pytest.approx(value - 0.01 * sum(pads))


def test_pads_value_counts_final_positions_and_distances() -> None:
    value = planner.pads_value(
        key_positions=[(11,), (23,)], weights=[1.0, 0.5], reliability=residue_rel,
        shifts=[2, 0], length=1000,
    )  # fmt: skip
    assert value == pytest.approx(WEAK_3_7[13 % 8] + 0.5 * WEAK_3_7[25 % 8])


def test_relevance_weights() -> None:
    assert planner.relevance_weights([2.0, 1.0, -1.0]) == (1.0, 0.5, 0.0)
    assert planner.relevance_weights([0.0, 0.0]) == (1.0, 1.0)


def test_default_position_reliability_u_shape() -> None:
    f = planner.default_position_reliability
    assert f(0, prompt_length=101) == f(100, prompt_length=101) == 1.0
    assert f(50, prompt_length=101) == 0.5


def test_pad_table_smallest_k() -> None:
    table = PadTable((0, 2, 3, 4, 5))
    assert table.smallest_k_for(3, 4) == 2
    assert table.smallest_k_for(1, 4) == 4
    assert table.smallest_k_for(0, 4) == 0


def test_normalize_chunks_ids_and_errors() -> None:
    original = [Chunk("a", score=1), Chunk("b", id="x"), "c"]
    out = normalize_chunks(original)
    assert [c.id for c in out] == ["chunk-0", "x", "chunk-2"]
    assert original[0].id is None  # not mutated
    with pytest.raises(InputError, match="empty"):
        normalize_chunks([])
    with pytest.raises(InputError, match="duplicate chunk id 'x'"):
        normalize_chunks([Chunk("a", id="x"), Chunk("b", id="x")])
    with pytest.raises(InputError, match="score"):
        normalize_chunks([Chunk("a", score=float("nan"))])


def test_question_terms_and_key_chars() -> None:
    terms = question_terms("What is the capital of Zorbia in 1990?")
    assert terms == ("capital", "zorbia", "1990")
    text = "Zorbia's capital (since 1990) is Qel. ZORBIA again; Zorbian is not a match."
    offsets = find_key_chars(text, chunk_id="c", terms=terms)
    assert offsets == (0, 9, 24, 38)
    with pytest.raises(InputError, match="'nope' does not occur in chunk 'c'"):
        find_key_chars(text, chunk_id="c", evidence=["nope"])
    assert find_key_chars(text, chunk_id="c", evidence=["Qel"]) == (33,)


def test_evidence_snippet_sentence() -> None:
    text = "First sentence here. The key fact is 42. Last one follows."
    key = text.index("42")
    start, end = evidence_snippet(text, key, max_chars=25)
    assert text[start:end] == "The key fact is 42."
    assert evidence_snippet(text, key, max_chars=1000) == (0, len(text))
