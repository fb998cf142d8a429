"""Offset-robust copies are planned on the filler's pad table and confirmed by re-tokenizing;
where the plan does not hold, trying each pad finds the same copies."""

from __future__ import annotations

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from phaseaware.assembly.inputs.chunks import Chunk
from phaseaware.assembly.inputs.options import AssemblyOptions
from phaseaware.assembly.pipeline import assemble
from phaseaware.assembly.plan.robust import copy_pad
from phaseaware.assembly.verify import final as copies_module
from phaseaware.profiles.registry import get_profile
from phaseaware.tokenizers import load_tokenizer

TOK = load_tokenizer("tiktoken:cl100k_base")
PROFILE = get_profile("deepseek-v4-flash-base")


@given(
    key_token=st.integers(0, 500),
    tokens=st.integers(1, 600),
    unit=st.integers(1, 3),
    const=st.integers(0, 2),
    residue=st.integers(0, 7),
    budget=st.integers(1, 700),
)
def test_copy_pad_is_the_first_pad_that_lands_within_the_budget(
    key_token: int, tokens: int, unit: int, const: int, residue: int, budget: int
) -> None:
    period = 8
    shifts = [0] + [k * unit + const for k in range(1, 2 * period + 1)]
    got = copy_pad(
        key_token=key_token, tokens=tokens, shifts=shifts, residue=residue, period=period,
        budget=budget, tries=2 * period,
    )  # fmt: skip
    expected = None
    for k in range(2 * period):  # the one-by-one search, on the table's numbers
        if tokens + shifts[k] > budget:
            break
        if (key_token + shifts[k]) % period == residue:
            expected = k
            break
    assert got == expected


def _assemble(texts: list[str], offsets: list[int], budget: int = 4000) -> dict:
    chunks = [
        Chunk(text=t + " code 4471 applies.", score=1.0 - 0.1 * i, evidence=("code 4471",))
        for i, t in enumerate(texts)
    ]
    result = assemble(
        chunks, tokenizer=TOK, chat_format="chatml", question="Which code applies?",
        profile=PROFILE, budget_tokens=budget,
        options=AssemblyOptions(offsets=tuple(offsets), allow_tokenizer_mismatch=True),
    )  # fmt: skip
    return {"prompt": result.prompt, **result.to_dict()}


WORDS = st.sampled_from("the module cell voltage recall warranty firmware update grid".split())
TEXT = st.lists(WORDS, min_size=8, max_size=40).map(" ".join)


@pytest.mark.parametrize("plan", ["off by one", "none"])
@settings(max_examples=15, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    texts=st.lists(TEXT, min_size=1, max_size=4),
    offsets=st.sets(st.integers(0, 9), min_size=2, max_size=4).map(sorted),
    budget=st.sampled_from([300, 4000]),
)
def test_a_wrong_plan_is_caught_and_the_one_by_one_search_finds_the_same_copies(
    plan: str, texts: list[str], offsets: list[int], budget: int
) -> None:
    expected = _assemble(texts, offsets, budget)
    real = copies_module.copy_pad

    def wrong(**kwargs: int) -> int | None:
        k = real(**kwargs)  # type: ignore[arg-type]
        return None if plan == "none" or k is None else k + 1

    copies_module.copy_pad = wrong  # type: ignore[assignment]
    try:
        got = _assemble(texts, offsets, budget)
    finally:
        copies_module.copy_pad = real
    assert got == expected
