"""Pure planning logic (``phaseaware.assembly.plan.planner``): admission, order, repeat, pads."""

from __future__ import annotations

import dataclasses

import pytest

from phaseaware.assembly.plan import planner
from phaseaware.assembly.plan.planner import PadTable
from phaseaware.errors import InputError

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


def test_estimate_keys_counts_in_context_tokens() -> None:
    keys, context = planner.estimate_keys(
        start=10, order=[1, 0], sizes=[5, 7], key_offsets=[(0, 3), (2,)], sep_tokens=1
    )
    assert keys == [(12,), (17, 20)] and context == 11


def test_repeat_candidate_and_when_it_pays() -> None:
    cand = planner.repeat_candidate(
        order=[0, 1, 2], scores=[0.9, 0.9, 1.0], has_keys=[True, True, False]
    )
    assert cand == 0  # the top chunk has no keys; ties go to the lower index
    assert planner.repeat_candidate(order=[2], scores=[0, 0, 1], has_keys=[1, 1, 0]) is None
    pays = dict(length=1000, window=64, cost=20, used=1000, budget=1100, suffix_tokens=10)
    assert planner.repeat_pays(key_positions=(100,), **pays)
    assert not planner.repeat_pays(key_positions=(990,), **pays)  # already read raw
    assert not planner.repeat_pays(key_positions=(100,), **{**pays, "budget": 1019})
    assert not planner.repeat_pays(key_positions=(100,), **{**pays, "cost": 60})  # outside
    assert planner.repeat_pays(key_positions=(990,), **{**pays, "window": None, "cost": 60})


def test_end_pad_reach_and_reserve() -> None:
    reach = dict(period=8, window=48, window_reliability=0.9, best_reliability=0.7)
    assert planner.end_pad_reach(**reach, length_period=None, pad=True, length_pad=True) == 0
    assert planner.end_pad_reach(**reach, length_period=4, pad=True, length_pad=True) == 8
    assert planner.end_pad_reach(**reach, length_period=4, pad=True, length_pad=False) == 0
    weak = {**reach, "window_reliability": 0.3}
    assert planner.end_pad_reach(**weak, length_period=4, pad=True, length_pad=True) == 56
    assert planner.end_pad_reach(**weak, length_period=4, pad=False, length_pad=True) == 8
    shifts = (0, 2, 3, 4, 5, 6)
    assert planner.end_reserve(end_shifts=shifts, length_period=4, length_pad=True) == 4
    assert planner.end_reserve(end_shifts=None, length_period=4, length_pad=True) == 0
    assert planner.end_reserve(end_shifts=shifts, length_period=None, length_pad=True) == 0
    assert planner.end_reserve(end_shifts=shifts, length_period=4, length_pad=False) == 0


def test_pad_tokens_sums_the_tables() -> None:
    tables = planner.PadTables(chunks=(LINEAR, PadTable((0, 3, 4))), end=PadTable((0, 2, 3)))
    plan = planner.Plan(order=(1, 0), pads=(2, 5), repeat=None, end_pad=1)
    assert planner.pad_tokens(tables=tables, plan=plan) == 4 + 5 + 2
    no_end = planner.PadTables(chunks=tables.chunks, end=None)
    assert planner.pad_tokens(tables=no_end, plan=dataclasses.replace(plan, end_pad=0)) == 9


def test_best_pads_takes_the_end_pad_that_fixes_the_length() -> None:
    # one key far from the end on a good residue; length residue 3 (mod 4) is bad
    common = dict(
        key_positions=[(1,)], weights=[1.0], pad_tables=[LINEAR], period=8, window=None,
        reliability=residue_rel, pad=True, pad_cost=0.001, slack=10,
    )  # fmt: skip
    factor = lambda n: 0.1 if n % 4 == 3 else 1.0  # noqa: E731
    pads, end = planner.best_pads(
        **common, end_shifts=(0, 1, 2, 3), length_factor=factor, length=99
    )
    assert pads == (0,) and end == 1  # 99 ≡ 3: one end-pad token moves it to 100
    pads, end = planner.best_pads(**common, end_shifts=None, length_factor=factor, length=100)
    assert pads == (0,) and end == 0
    off = planner.best_pads(
        **{**common, "pad": False}, end_shifts=None, length_factor=factor, length=100
    )
    assert off == ((0,), 0)
