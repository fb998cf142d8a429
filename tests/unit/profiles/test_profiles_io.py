"""Profile format v1: round trips and one test per validation error."""

from __future__ import annotations

import copy
import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from phaseaware.errors import ProfileError, ProfileNotFoundError
from phaseaware.profiles.io import (
    dumps_profile,
    load_profile,
    loads_profile,
    profile_from_dict,
    profile_to_dict,
    save_profile,
    validate_profile_dict,
    validate_profile_file,
)
from phaseaware.profiles.model import (
    SCHEMA,
    LengthResidueEffect,
    LocalWindowEffect,
    Profile,
    Provenance,
    TokenizerRef,
)


def make_profile(**changes: Any) -> Profile:
    fields: dict[str, Any] = {
        "model": "toy-model",
        "period": 4,
        "residue_accuracy": (0.5, 0.75, 1.0, 0.0),
        "n": (4, 4, 4, None),
        "ci_low": (0.15, 0.3, 0.51, None),
        "ci_high": (0.85, 0.95, 1.0, None),
        "tokenizer": TokenizerRef(spec="tiktoken:cl100k_base", fingerprint="sha256:abc"),
        "local_window": None,
        "provenance": Provenance(
            kind="measured",
            source="unit test",
            protocol="toy",
            created="2026-12-02T10:00:00+00:00",
            tool_version="0.1.0",
        ),
    }
    fields.update(changes)
    return Profile(**fields)


FULL = make_profile(
    compression_stride=2,
    local_window=16,
    reliability=(0.5, 0.7, 0.9, 0.1),
    length_residue_accuracy=LengthResidueEffect(
        period=2, accuracy=(0.9, None), kind="measured", source="sweep", n=(10, None), note="hi"
    ),
    local_window_accuracy=LocalWindowEffect(
        accuracy=0.8, n=40, ci_low=0.65, ci_high=0.9, min_distance=13, max_distance=16, source="s"
    ),
    extra={"x-notes": {"b": [1, 2], "a": "x"}, "x-another": None},
)


@pytest.mark.parametrize("profile", [make_profile(), FULL], ids=["minimal", "full"])
def test_round_trip(profile: Profile, tmp_path: Path) -> None:
    path = tmp_path / "p.json"
    save_profile(profile, path)
    loaded = load_profile(path)
    assert loaded == profile
    assert loaded.extra == profile.extra
    assert path.read_text(encoding="utf-8") == dumps_profile(profile)
    assert dumps_profile(loaded) == dumps_profile(profile)
    assert profile_from_dict(profile_to_dict(profile)) == profile


def test_dumps_is_stable_and_readable() -> None:
    text = dumps_profile(FULL)
    assert text.endswith("}\n") and not text.endswith("\n\n")
    keys = list(json.loads(text))
    assert keys[:3] == ["schema", "model", "period"]
    assert keys[-2:] == ["x-another", "x-notes"]  # extras last, sorted
    assert '"residue_accuracy": [0.5, 0.75, 1.0, 0.0]' in text  # numbers on one line
    assert '"n": [4, 4, 4, null]' in text
    assert "  " in text.splitlines()[1][:2]


def test_optional_keys_omitted_when_unset() -> None:
    doc = profile_to_dict(make_profile())
    for key in ("compression_stride", "reliability", "length_residue_accuracy"):
        assert key not in doc


def test_from_dict_does_not_share_caller_state() -> None:
    doc = profile_to_dict(FULL)
    before = copy.deepcopy(doc)
    profile = profile_from_dict(doc)
    doc["x-notes"]["b"].append(3)
    assert profile.extra["x-notes"] == {"b": [1, 2], "a": "x"}
    profile_to_dict(profile)["x-notes"]["a"] = "changed"
    assert profile.extra["x-notes"]["a"] == "x"
    doc["x-notes"]["b"].pop()
    assert doc == before


def test_extra_shadowing_known_key_is_refused() -> None:
    with pytest.raises(ProfileError, match="known keys"):
        profile_to_dict(make_profile(extra={"period": 3}))


def test_save_refuses_invalid_profile(tmp_path: Path) -> None:
    bad = make_profile(residue_accuracy=(0.5, 75.0, 1.0, 0.0))
    with pytest.raises(ProfileError, match=r"residue_accuracy\[1\].*percentage"):
        save_profile(bad, tmp_path / "p.json")
    assert list(tmp_path.iterdir()) == []


def test_profile_dataclass_checks_lengths() -> None:
    with pytest.raises(ProfileError, match="ci_low has 3 entries but period is 4"):
        make_profile(ci_low=(0.1, 0.2, 0.3))
    with pytest.raises(ProfileError, match="period must be an int >= 1"):
        make_profile(period=0)


def _set(key: str, value: Any) -> Callable[[dict], None]:
    def mutate(doc: dict) -> None:
        target = doc
        parts = key.split(".")
        for part in parts[:-1]:
            target = target[part]
        target[parts[-1]] = value

    return mutate


def _delete(key: str) -> Callable[[dict], None]:
    def mutate(doc: dict) -> None:
        target = doc
        parts = key.split(".")
        for part in parts[:-1]:
            target = target[part]
        del target[parts[-1]]

    return mutate


BAD_DOCS: list[tuple[str, Callable[[dict], None], str]] = [
    ("no schema", _delete("schema"), f'missing key \'schema\'; add "schema": "{SCHEMA}"'),
    ("future schema", _set("schema", "phaseaware.profile/v2"), f"supported: {SCHEMA}"),
    ("missing model", _delete("model"), "missing key 'model'"),
    ("missing ci_high", _delete("ci_high"), "missing key 'ci_high'"),
    ("missing tokenizer", _delete("tokenizer"), "missing key 'tokenizer'"),
    ("missing local_window", _delete("local_window"), "missing key 'local_window'"),
    ("empty model", _set("model", " "), "model: expected a non-empty string"),
    ("period zero", _set("period", 0), "period: expected an int >= 1"),
    ("period bool", _set("period", True), "period: expected an int >= 1"),
    ("period float", _set("period", 4.0), "period: expected an int >= 1"),
    ("short accuracy", _set("residue_accuracy", [0.5, 0.5, 0.5]), "has 3 entries but period is 4"),
    ("long n", _set("n", [1, 1, 1, 1, 1]), "n: has 5 entries but period is 4"),
    ("accuracy not list", _set("residue_accuracy", 0.5), "expected a list"),
    ("percentage", _set("residue_accuracy", [50, 75, 100, 0]), "outside [0, 1]"),
    ("negative", _set("residue_accuracy", [-0.1, 0.75, 1.0, 0.0]), "residue_accuracy[0]: -0.1"),
    ("nan", _set("residue_accuracy", [float("nan"), 0.75, 1.0, 0.0]), "not a finite number"),
    ("inf ci", _set("ci_high", [float("inf"), None, None, None]), "ci_high[0]: inf"),
    (
        "null accuracy",
        _set("residue_accuracy", [None, 0.75, 1.0, 0.0]),
        "residue_accuracy[0]: is null",
    ),
    ("string accuracy", _set("residue_accuracy", ["0.5", 0.75, 1.0, 0.0]), "expected a number"),
    ("negative n", _set("n", [-1, 4, 4, None]), "n[0]: expected a trial count"),
    ("float n", _set("n", [4.5, 4, 4, None]), "n[0]: expected a trial count"),
    (
        "low > high",
        _set("ci_low", [0.9, 0.3, 0.51, None]),
        "ci_low[0] = 0.9 is greater than ci_high[0]",
    ),
    ("acc below ci", _set("ci_low", [0.6, 0.3, 0.51, None]), "residue_accuracy[0] = 0.5 is below"),
    ("acc above ci", _set("ci_high", [0.4, 0.95, 1.0, None]), "residue_accuracy[0] = 0.5 is above"),
    ("tokenizer not obj", _set("tokenizer", "cl100k"), "tokenizer: expected an object"),
    ("tokenizer typo", _set("tokenizer.fingerprnt", "x"), "tokenizer: unknown key 'fingerprnt'"),
    ("tokenizer missing", _delete("tokenizer.fingerprint"), "tokenizer: missing key 'fingerprint'"),
    ("tokenizer spec int", _set("tokenizer.spec", 3), "tokenizer.spec: expected"),
    ("window negative", _set("local_window", -1), "local_window: expected an int >= 0"),
    ("stride zero", _set("compression_stride", 0), "compression_stride: expected an int >= 1"),
    (
        "provenance kind",
        _set("provenance.kind", "guessed"),
        "provenance.kind: 'guessed' is not one of",
    ),
    ("provenance missing", _delete("provenance.created"), "provenance: missing key 'created'"),
    ("provenance date", _set("provenance.created", "yesterday"), "not an ISO 8601"),
    ("provenance source", _set("provenance.source", ""), "provenance.source: expected"),
    ("reliability length", _set("reliability", [0.5]), "reliability: has 1 entries"),
    ("reliability range", _set("reliability", [0.5, 0.5, 0.5, 2]), "reliability[3]: 2"),
    ("length period", _set("length_residue_accuracy.period", 0), "length_residue_accuracy.period"),
    (
        "length acc len",
        _set("length_residue_accuracy.accuracy", [None]),
        "accuracy: has 1 entries but period is 2",
    ),
    ("length kind", _set("length_residue_accuracy.kind", "rumour"), "length_residue_accuracy.kind"),
    ("length typo", _set("length_residue_accuracy.nn", 1), "unknown key 'nn'"),
    ("length n", _set("length_residue_accuracy.n", [1, -2]), "length_residue_accuracy.n[1]"),
    ("window acc", _set("local_window_accuracy.accuracy", 1.5), "local_window_accuracy.accuracy"),
    ("window ci", _set("local_window_accuracy.ci_high", 0.7), "lies outside its interval"),
    ("window n", _set("local_window_accuracy.n", -1), "local_window_accuracy.n: expected"),
    ("window typo", _set("local_window_accuracy.acc", 1), "unknown key 'acc'"),
    ("window size", _set("local_window", None), "local_window_accuracy needs local_window"),
    (
        "window distances",
        _set("local_window_accuracy.min_distance", 20),
        "min_distance is greater than max_distance",
    ),
]


@pytest.mark.parametrize(
    ("mutate", "fragment"), [b[1:] for b in BAD_DOCS], ids=[b[0] for b in BAD_DOCS]
)
def test_validation_errors(mutate: Callable[[dict], None], fragment: str) -> None:
    doc = profile_to_dict(FULL)
    mutate(doc)
    errors = validate_profile_dict(doc)
    assert any(fragment in e for e in errors), errors
    with pytest.raises(ProfileError) as info:
        profile_from_dict(doc, source="bad.json")
    assert "invalid profile bad.json" in str(info.value)
    assert fragment in str(info.value)


def test_not_an_object() -> None:
    assert validate_profile_dict([1, 2]) == ["a profile must be a JSON object, got list"]


def test_all_problems_reported_together() -> None:
    doc = profile_to_dict(FULL)
    doc["model"] = ""
    doc["local_window"] = "big"
    assert len(validate_profile_dict(doc)) == 2


@pytest.mark.parametrize(
    ("text", "fragment"),
    [
        ("{not json", "is not valid JSON"),
        ('{"residue_accuracy": [NaN]}', "NaN is not allowed"),
        ('{"x": Infinity}', "Infinity is not allowed"),
        ('{"schema": "a", "schema": "b"}', "duplicate key 'schema'"),
    ],
)
def test_bad_json(text: str, fragment: str, tmp_path: Path) -> None:
    path = tmp_path / "bad.json"
    path.write_text(text)
    with pytest.raises(ProfileError, match=fragment):
        loads_profile(text)
    [error] = validate_profile_file(path)
    assert fragment in error and "bad.json" in error


def test_file_problems(tmp_path: Path) -> None:
    with pytest.raises(ProfileNotFoundError, match="does not exist"):
        load_profile(tmp_path / "missing.json")
    with pytest.raises(ProfileError, match="is a folder"):
        load_profile(tmp_path)
    latin = tmp_path / "latin.json"
    latin.write_bytes(b'{"model": "caf\xe9"}')
    with pytest.raises(ProfileError, match="not UTF-8"):
        load_profile(latin)
    assert "does not exist" in validate_profile_file(tmp_path / "missing.json")[0]


def test_valid_file_has_no_errors(tmp_path: Path) -> None:
    path = save_profile(FULL, tmp_path / "ok.json")
    assert validate_profile_file(path) == []
