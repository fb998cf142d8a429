"""assemble(): errors, budget, determinism, no mutation, measured placements."""

from __future__ import annotations

import copy
import dataclasses
import json

import pytest

from phaseaware.assembly import AssemblyOptions, Chunk, assemble
from phaseaware.errors import (
    BudgetError,
    FingerprintMismatchError,
    InputError,
    PeriodMismatchError,
)
from phaseaware.profiles.model import LocalWindowEffect, TokenizerRef
from phaseaware.profiles.registry import get_profile
from phaseaware.tokenizers import load_tokenizer

QUESTION = "What is the launch code of Project Tamarind?"


@pytest.fixture(scope="module")
def cl100k():
    return load_tokenizer("tiktoken:cl100k_base")


@pytest.fixture(scope="module")
def base_profile():
    return get_profile("deepseek-v4-flash-base")


def make_chunks(n: int = 6) -> list[Chunk]:
    out = []
    for i in range(n):
        filler = "Background material about unrelated logistics. " * (3 + 2 * i)
        out.append(
            Chunk(
                text=f"{filler}The launch code of Project Tamarind is {7000 + i}. {filler}",
                score=round(1.0 - i * 0.1, 2),
                id=f"doc-{i}",
            )
        )
    return out


def run(tokenizer, profile, chunks, *, strict_tokenizer: bool = False, **kw):
    """assemble with cl100k and a DeepSeek profile: the tokenizer mismatch is opted in
    explicitly (``allow_tokenizer_mismatch``) unless ``strict_tokenizer``."""
    chat_format = kw.pop("chat_format", "chatml")
    kw.setdefault("budget_tokens", 4000)
    if not strict_tokenizer:
        options = kw.get("options") or AssemblyOptions()
        kw["options"] = dataclasses.replace(options, allow_tokenizer_mismatch=True)
    return assemble(
        chunks,
        tokenizer=tokenizer,
        chat_format=chat_format,
        question=QUESTION,
        profile=profile,
        **kw,
    )


def test_placements_are_measured(cl100k, base_profile) -> None:
    result = run(cl100k, base_profile, make_chunks())
    measured = cl100k.tokenize(result.prompt)
    assert len(measured) == result.token_count <= 4000
    assert result.prompt.count("<|im_start|>user\n") == 1
    for p in result.placements:
        assert p.key_token_positions
        for t, c, r in zip(p.key_token_positions, p.key_char_offsets, p.residues, strict=True):
            assert measured.token_at_char(c) == t
            assert t % 8 == r
        assert result.prompt[p.char_start : p.char_end] in {c.text for c in make_chunks()}
    # the most relevant chunk sits closest to the question
    assert result.placements[-1].chunk_id == "doc-0"
    assert result.expected_accuracy > result.naive_expected_accuracy
    # keys outside the raw local window avoid the weak residues 3 and 7
    for p in result.placements:
        for t, r in zip(p.key_token_positions, p.residues, strict=True):
            if result.token_count - t > base_profile.local_window:
                assert r not in (3, 7)


@pytest.mark.parametrize("offset", [0, 1, 3])
def test_server_position_offset_moves_the_plan(cl100k, base_profile, offset) -> None:
    # a server that puts `offset` tokens (a BOS) before the prompt: the plan lands the
    # model's positions (prompt index + offset) off the weak residues 3 and 7
    result = run(
        cl100k, base_profile, make_chunks(), options=AssemblyOptions(position_offset=offset)
    )
    assert result.position_offset == offset
    measured = cl100k.tokenize(result.prompt)
    for p in result.placements:
        for t, c, r in zip(p.key_token_positions, p.key_char_offsets, p.residues, strict=True):
            assert measured.token_at_char(c) == t  # positions stay prompt indices
            assert r == (t + offset) % 8
            if result.token_count - t > base_profile.local_window:
                assert r not in (3, 7)
    with pytest.raises(InputError, match="position_offset"):
        AssemblyOptions(position_offset=-1)


def test_deterministic_and_no_mutation(cl100k, base_profile) -> None:
    chunks = make_chunks()
    snapshot = copy.deepcopy(chunks)
    first = run(cl100k, base_profile, chunks)
    second = run(cl100k, base_profile, list(chunks))
    assert chunks == snapshot and [c.id for c in chunks] == [c.id for c in snapshot]
    a = json.dumps(first.to_dict(), ensure_ascii=False)
    b = json.dumps(second.to_dict(), ensure_ascii=False)
    assert a == b


def test_empty_list_and_whitespace_chunks(cl100k, base_profile) -> None:
    with pytest.raises(InputError, match="chunks is empty"):
        run(cl100k, base_profile, [])
    result = run(cl100k, base_profile, [Chunk("   \n\t", id="blank"), *make_chunks(2)])
    assert [(d.chunk_id, d.reason) for d in result.dropped] == [("blank", "empty")]
    only_blank = run(cl100k, base_profile, [Chunk(" ", id="blank")])
    assert only_blank.placements == () and only_blank.dropped[0].reason == "empty"


def test_budget_drops_with_reasons(cl100k, base_profile) -> None:
    chunks = make_chunks()
    huge = Chunk("word " * 3000, score=5.0, id="huge")
    result = run(cl100k, base_profile, [huge, *chunks], budget_tokens=600)
    assert result.token_count <= 600
    reasons = {d.chunk_id: d.reason for d in result.dropped}
    assert reasons["huge"].startswith("over budget: needs 30")
    placed = {p.chunk_id for p in result.placements}
    assert placed | set(reasons) == {"huge"} | {c.id for c in chunks}
    assert not placed & set(reasons)
    for reason in reasons.values():
        assert reason.startswith("over budget: needs ")


def test_budget_smaller_than_template(cl100k, base_profile) -> None:
    with pytest.raises(BudgetError, match="budget_tokens=5"):
        run(cl100k, base_profile, make_chunks(1), budget_tokens=5)


def test_evidence_not_found(cl100k, base_profile) -> None:
    with pytest.raises(InputError, match="'absent' does not occur in chunk 'c1'"):
        run(cl100k, base_profile, [Chunk("some text", id="c1", evidence=("absent",))])


def test_fingerprint_and_period_mismatch(cl100k, base_profile) -> None:
    wrong = dataclasses.replace(
        base_profile, tokenizer=TokenizerRef(spec="deepseek-v4", fingerprint="sha256:00")
    )
    with pytest.raises(FingerprintMismatchError):
        run(cl100k, wrong, make_chunks(2), strict_tokenizer=True)
    with pytest.raises(FingerprintMismatchError, match="deepseek-v4"):
        run(cl100k, base_profile, make_chunks(2), strict_tokenizer=True)  # built-ins too
    allowed = run(
        cl100k, wrong, make_chunks(2), options=AssemblyOptions(allow_tokenizer_mismatch=True)
    )
    assert allowed.placements and allowed.tokenizer_mismatch_allowed
    assert allowed.to_dict()["tokenizer_mismatch_allowed"] is True
    with pytest.raises(PeriodMismatchError):
        run(cl100k, base_profile, make_chunks(2), options=AssemblyOptions(period=4))


def test_bad_options() -> None:
    with pytest.raises(InputError, match="strategy"):
        AssemblyOptions(strategy="best")
    with pytest.raises(InputError, match="pad_cost"):
        AssemblyOptions(pad_cost=-1)
    with pytest.raises(InputError, match="pad_cost must be a number"):
        AssemblyOptions(pad_cost="cheap")
    with pytest.raises(InputError, match="options.pad must be true or false"):
        AssemblyOptions(pad="yes")
    with pytest.raises(InputError, match="options.period"):
        AssemblyOptions(period=2.5)


def test_length_residue_avoided() -> None:
    tok = load_tokenizer("deepseek-v4")
    profile = get_profile("deepseek-v4-flash-0731")
    effect = profile.length_residue_accuracy
    bad = {r for r in range(effect.period) if profile.length_factor(1000 * effect.period + r) < 1}
    assert bad == {3}
    for n in range(1, 7):  # several lengths so at least one needs the end pad
        result = run(tok, profile, make_chunks(n), chat_format="deepseek-v4")
        assert result.token_count % effect.period not in bad
        assert result.length_residue == result.token_count % effect.period


def test_repeat_restates_top_evidence(cl100k, base_profile) -> None:
    chunks = make_chunks(4)
    # given order keeps the top chunk first, far from the question: repeat is worth it
    result = run(cl100k, base_profile, chunks, options=AssemblyOptions(strategy="none"))
    assert result.repeat is not None and result.repeat.chunk_id == "doc-0"
    assert "7000" in result.repeat.text and result.repeated_tokens > 0
    measured = cl100k.tokenize(result.prompt)
    for t, c in zip(result.repeat.key_token_positions, result.repeat.key_char_offsets, strict=True):
        assert measured.token_at_char(c) == t
        assert result.token_count - t <= base_profile.local_window
    off = run(cl100k, base_profile, chunks, options=AssemblyOptions(strategy="none", repeat=False))
    assert off.repeat is None and result.expected_accuracy >= off.expected_accuracy


def test_no_profile_and_pad_off(cl100k) -> None:
    result = run(cl100k, None, make_chunks(5), chat_format="none")
    assert result.padding_tokens == 0 and result.profile is None
    assert result.placements[-1].chunk_id == "doc-0" and result.placements[0].chunk_id == "doc-1"
    assert result.messages is None
    base = get_profile("deepseek-v4-flash-base")
    off = run(cl100k, base, make_chunks(5), options=AssemblyOptions(pad=False, repeat=False))
    assert off.padding_tokens == 0


def test_from_specs_and_dict_keys() -> None:
    result = assemble(
        make_chunks(3),
        tokenizer="tiktoken:o200k_base",
        chat_format="chatml",
        question=QUESTION,
        profile="deepseek-v4-flash-base",
        budget_tokens=3000,
        options=AssemblyOptions(allow_tokenizer_mismatch=True),
    )
    d = result.to_dict()
    for key in (
        "prompt", "messages", "token_count", "placements", "padding_tokens", "dropped",
        "expected_accuracy", "naive_expected_accuracy", "tokenizer", "fingerprint", "chat_format",
    ):  # fmt: skip
        assert key in d
    assert d["messages"][0]["role"] == "user"
    for p in d["placements"]:
        assert {"chunk_id", "key_token_positions", "key_char_offsets", "residues"} <= set(p)


def weak_window(profile, accuracy: float = 0.3):
    """``profile`` with a 48-token raw window measured worse than its residues."""
    return dataclasses.replace(
        profile,
        local_window=48,
        local_window_accuracy=LocalWindowEffect(
            accuracy=accuracy, n=50, ci_low=max(0.0, accuracy - 0.1),
            ci_high=min(1.0, accuracy + 0.1), min_distance=20, max_distance=48, source="test",
        ),
    )  # fmt: skip


def _tail_chunk() -> list[Chunk]:
    filler = "Background material about unrelated logistics. " * 12
    return [Chunk(text=f"{filler}The launch code of Project Tamarind is 7000.", id="tail")]


def test_measured_weak_window_pushes_the_key_out(cl100k, base_profile) -> None:
    # unmeasured window: a key read raw needs no pad and no end pad
    plain = run(cl100k, dataclasses.replace(base_profile, local_window=48), _tail_chunk())
    (p,) = plain.placements
    assert plain.token_count - p.key_token_positions[0] <= 48
    assert plain.padding_tokens == 0
    # measured worse than every residue: the end pad pushes the key out of the
    # window and the chunk pad puts it on a reliable residue (measured)
    profile = weak_window(base_profile)
    result = run(cl100k, profile, _tail_chunk())
    (p,) = result.placements
    keys, acc = p.key_token_positions, profile.residue_accuracy
    assert all(result.token_count - t > 48 for t in keys) and result.end_padding_tokens > 0
    best_shift = max(sum(acc[(t + s) % 8] for t in keys) / len(keys) for s in range(8))
    assert p.expected_accuracy == pytest.approx(best_shift)
    assert cl100k.tokenize(result.prompt).token_at_char(p.key_char_offsets[0]) == keys[0]
