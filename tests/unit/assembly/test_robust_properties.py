"""Offset-robust placement: the covering planner against brute force, and the claim
"for every offset in the set, one copy sits on a reliable residue" checked on an
independent tokenization (token ids decoded one by one, not the adapter's offsets)."""

from __future__ import annotations

import itertools
import json
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from phaseaware.assembly.inputs.chunks import Chunk
from phaseaware.assembly.inputs.options import AssemblyOptions
from phaseaware.assembly.pipeline import assemble
from phaseaware.assembly.plan.robust import covered_offsets, covering_residues, reliable_residues
from phaseaware.endpoints import endpoint_options
from phaseaware.endpoints.record import EndpointRecord, apply_endpoint, redact_url
from phaseaware.errors import FingerprintMismatchError, InputError
from phaseaware.profiles.registry import get_profile
from phaseaware.tokenizers import load_tokenizer

TOK = load_tokenizer("tiktoken:cl100k_base")
PROFILE = get_profile("deepseek-v4-flash-base")
RELIABILITY = [PROFILE.residue_reliability(r) for r in range(PROFILE.period)]


@given(
    period=st.integers(2, 8),
    data=st.data(),
)
def test_covering_residues_is_minimal_and_covers(period: int, data: st.DataObject) -> None:
    reliable = frozenset(data.draw(st.sets(st.integers(0, period - 1), min_size=1)))
    offsets = sorted(data.draw(st.sets(st.integers(0, 12), min_size=1, max_size=5)))
    existing = data.draw(st.lists(st.integers(0, period - 1), max_size=2))
    extra = covering_residues(existing=existing, offsets=offsets, period=period, reliable=reliable)
    got = covered_offsets(
        copy_residues=[*existing, *extra], offsets=offsets, period=period, reliable=reliable
    )
    assert got == tuple(offsets)
    smallest = next(
        size
        for size in range(period + 1)
        for combo in itertools.combinations(range(period), size)
        if covered_offsets(
            copy_residues=[*existing, *combo], offsets=offsets, period=period, reliable=reliable
        )
        == tuple(offsets)
    )
    assert len(extra) == smallest


def test_reliable_residues_threshold() -> None:
    assert reliable_residues([0.5, 0.7, 0.66, 0.3], tolerance=0.05) == {1, 2}
    assert reliable_residues([0.5, 0.7, 0.66, 0.3], tolerance=0.0) == {1}


WORDS = st.sampled_from(
    "the module cell voltage recall warranty firmware update battery inverter grid".split()
)
TEXT = st.lists(WORDS, min_size=8, max_size=60).map(" ".join)


def _independent_positions(prompt: str) -> list[int]:
    """Start char of each token, from decoding ids one by one (ASCII prompts)."""
    starts, pos = [], 0
    for token in TOK.encode(prompt):
        starts.append(pos)
        pos += len(TOK.decode([token]))
    assert pos == len(prompt)
    return starts


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    texts=st.lists(TEXT, min_size=1, max_size=5),
    offsets=st.sets(st.integers(0, 9), min_size=1, max_size=4).map(sorted),
)
def test_every_offset_has_a_copy_on_a_reliable_residue(
    texts: list[str], offsets: list[int]
) -> None:
    chunks = [
        Chunk(text=t + " code 4471 applies.", score=1.0 - 0.1 * i, evidence=("code 4471",))
        for i, t in enumerate(texts)
    ]
    result = assemble(
        chunks, tokenizer=TOK, chat_format="chatml", question="Which code applies?",
        profile=PROFILE, budget_tokens=4000,
        # cl100k with a DeepSeek profile: the tokenizer mismatch is opted in explicitly
        options=AssemblyOptions(offsets=tuple(offsets), allow_tokenizer_mismatch=True),
    )  # fmt: skip
    report = result.robust
    assert report is not None and report.offsets == tuple(offsets)
    reliable = reliable_residues(RELIABILITY, tolerance=0.05)
    assert set(report.reliable_residues) == reliable
    starts = _independent_positions(result.prompt)
    positions = [max(i for i, s in enumerate(starts) if s <= c.key_char_offset)
                 for c in report.copies]  # fmt: skip
    assert positions == [c.key_token_position for c in report.copies]
    for d in offsets:
        assert any((t + d) % PROFILE.period in reliable for t in positions), (d, positions)
    assert report.covered == tuple(offsets)
    assert all(p.residues == () for p in result.placements)
    assert result.token_count == len(starts) <= 4000


def _record(**changes: object) -> EndpointRecord:
    doc = {
        "base_url": "http://127.0.0.1:1/v1", "model": "m", "offset": 2, "offsets": (2,),
        "mode": "count", "stability": "constant", "date": "2026-01-01T00:00:00+00:00",
        "tokenizer_spec": TOK.spec, "tokenizer_fingerprint": TOK.fingerprint(),
        "chat_format": "chatml", "probes": 18, "tool_version": "0",
    }  # fmt: skip
    doc.update(changes)
    return EndpointRecord(**doc)  # type: ignore[arg-type]


def test_record_round_trip_and_apply(tmp_path: Path) -> None:
    from phaseaware.endpoints.record import load_endpoint_record, save_endpoint_record

    record = _record()
    path = save_endpoint_record(record, directory=tmp_path)
    assert load_endpoint_record(path) == record
    assert json.loads(path.read_text())["offset"] == 2
    assert apply_endpoint(AssemblyOptions(), record, TOK).position_offset == 2
    varying = _record(offsets=(1, 2, 3), offset=1, stability="varying")
    assert apply_endpoint(AssemblyOptions(), varying, TOK).offsets == (1, 2, 3)
    with pytest.raises(FingerprintMismatchError):
        apply_endpoint(AssemblyOptions(), record, load_tokenizer("tiktoken:o200k_base"))
    # one rule for the CLI and the adapters: a disagreeing offset is refused, naming both
    with pytest.raises(InputError, match="say offset 1, but the endpoint record .* says offset 2"):
        apply_endpoint(AssemblyOptions(position_offset=1), record, TOK)
    assert apply_endpoint(AssemblyOptions(position_offset=2), record, TOK).position_offset == 2
    assert endpoint_options(AssemblyOptions(position_offset=2), record, TOK) == apply_endpoint(
        AssemblyOptions(position_offset=2), record, TOK
    )
    with pytest.raises(InputError, match="inconsistent"):
        _record(offsets=(1, 2), offset=1)


def test_redact_url() -> None:
    assert (
        redact_url("https://u:p@host/v1?api_key=abc&x=1") == "https://***@host/v1?api_key=***&x=1"
    )


@pytest.mark.parametrize("bad", [(), "1,2", (-1,), (1.5,), (True,)])
def test_bad_offsets_are_typed_errors(bad: object) -> None:
    with pytest.raises(InputError):
        AssemblyOptions(offsets=bad)  # type: ignore[arg-type]
