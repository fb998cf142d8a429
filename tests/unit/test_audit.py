"""audit_prompt: measured positions, residues and accuracies of evidence in a prompt."""

from __future__ import annotations

import json

import pytest

from phaseaware.audit import audit_prompt
from phaseaware.errors import FingerprintMismatchError, InputError
from phaseaware.profiles.registry import get_profile
from phaseaware.tokenizers import load_tokenizer

# cl100k with a DeepSeek profile: the tokenizer mismatch is opted in explicitly
MISMATCH_OK = {"allow_tokenizer_mismatch": True}


@pytest.fixture(scope="module")
def cl100k():
    return load_tokenizer("tiktoken:cl100k_base")


def test_audit_prompt_reports_missing_and_length(cl100k) -> None:
    profile = get_profile("deepseek-v4-flash-0731")
    text = "alpha beta gamma. The code is 4471. " * 3
    result = audit_prompt(
        text, tokenizer=cl100k, profile=profile, evidence=["4471", "absent"], **MISMATCH_OK
    )
    found, missing = result.evidence
    assert missing.found is False and missing.occurrences == ()
    assert len(found.occurrences) == 3
    measured = cl100k.tokenize(text)
    for occ in found.occurrences:
        assert measured.token_at_char(occ.char_offset) == occ.token_position
        assert occ.residue == occ.token_position % profile.period
    assert result.length.residue == len(measured) % 4
    with pytest.raises(InputError, match="evidence"):
        audit_prompt(text, tokenizer=cl100k, profile=profile, evidence=[], **MISMATCH_OK)
    # a server BOS in front: residues and the length residue move by one, positions stay
    shifted = audit_prompt(
        text, tokenizer=cl100k, profile=profile, evidence=["4471"], position_offset=1, **MISMATCH_OK
    )
    for occ, base in zip(shifted.evidence[0].occurrences, found.occurrences, strict=True):
        assert occ.token_position == base.token_position
        assert occ.residue == (base.token_position + 1) % profile.period
    assert shifted.length.residue == (len(measured) + 1) % 4
    with pytest.raises(InputError, match="position_offset"):
        audit_prompt(
            text,
            tokenizer=cl100k,
            profile=profile,
            evidence=["4471"],
            position_offset=-1,
            **MISMATCH_OK,
        )


def test_audit_to_dict_keeps_its_keys_and_order(cl100k) -> None:
    profile = get_profile("deepseek-v4-flash-0731")
    result = audit_prompt(
        "The code is 4471.", tokenizer=cl100k, profile=profile, evidence=["4471"], **MISMATCH_OK
    )
    doc = json.loads(json.dumps(result.to_dict()))
    assert list(doc) == [
        "token_count", "profile", "period", "tokenizer", "evidence", "length",
        "tokenizer_mismatch_allowed",
    ]  # fmt: skip
    assert doc["tokenizer_mismatch_allowed"] is True
    with pytest.raises(FingerprintMismatchError, match="deepseek-v4"):
        audit_prompt("The code is 4471.", tokenizer=cl100k, profile=profile, evidence=["4471"])
    (item,) = doc["evidence"]
    assert list(item) == ["text", "found", "best_expected_accuracy", "occurrences"]
    assert item["best_expected_accuracy"] == max(
        o["expected_accuracy"] for o in item["occurrences"]
    )
    assert list(item["occurrences"][0]) == [
        "char_offset", "token_position", "residue", "expected_accuracy", "in_local_window",
    ]  # fmt: skip
    assert list(doc["length"]) == ["period", "residue", "accuracy", "factor", "kind", "source"]
