"""Built-in published profiles: they load, match the published counts, and are generated."""

from __future__ import annotations

import importlib.util
from pathlib import Path

import pytest

from phaseaware.intervals import wilson_interval
from phaseaware.profiles.io import load_profile, validate_profile_file
from phaseaware.profiles.registry import builtin_profile_dir

ROOT = Path(__file__).resolve().parents[3]
# The shipped DeepSeek-V4 tokenizer's fingerprint, which every built-in records.
DEEPSEEK_V4_FINGERPRINT = "sha256:f444d6af1e645e0538ba644ce0e778280cd0537ffb6c0ec30d56443f6891cdf7"

# Typed independently of scripts/make_builtin_profiles.py, straight from the brief.
PUBLISHED = {
    "deepseek-v4-flash-base": (4, 256, [112, 178, 169, 76, 115, 179, 165, 84]),
    "deepseek-v4-pro-base": (4, 256, [156, 226, 202, 144, 160, 233, 206, 149]),
    "deepseek-v4-flash-0731": (4, 256, [206, 227, 251, 247, 208, 231, 255, 246]),
    "deepseek-v4-pro-0813": (4, 256, [200, 230, 234, 198, 198, 229, 236, 204]),
    "deepseek-v4.1-flash": (2, 2560, [2432, 2284, 2435, 2296, 2424, 2312, 2440, 2297]),
}


def load_generator():
    spec = importlib.util.spec_from_file_location(
        "make_builtin_profiles", ROOT / "scripts" / "make_builtin_profiles.py"
    )
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_every_builtin_is_listed_here() -> None:
    assert {p.stem for p in builtin_profile_dir().glob("*.json")} == set(PUBLISHED)


@pytest.mark.parametrize("name", sorted(PUBLISHED))
def test_builtin_matches_published_counts(name: str) -> None:
    stride, n, counts = PUBLISHED[name]
    path = builtin_profile_dir() / f"{name}.json"
    assert validate_profile_file(path) == []
    profile = load_profile(path)
    assert profile.model == name
    assert profile.period == 8
    assert profile.compression_stride == stride
    assert profile.n == (n,) * 8
    assert [round(a * n) for a in profile.residue_accuracy] == counts
    assert profile.residue_accuracy == tuple(c / n for c in counts)
    for r, c in enumerate(counts):
        low, high = wilson_interval(c, n)
        assert profile.ci_low[r] == pytest.approx(low, abs=5e-7)
        assert profile.ci_high[r] == pytest.approx(high, abs=5e-7)
    assert profile.provenance.kind == "published"
    assert "arXiv 2609.36322" in profile.provenance.source
    assert profile.tokenizer.spec == "deepseek-v4"
    assert profile.tokenizer.fingerprint == DEEPSEEK_V4_FINGERPRINT
    assert profile.local_window == (128 if "flash" in name else None)


def test_headline_numbers() -> None:
    flash0731 = load_profile(builtin_profile_dir() / "deepseek-v4-flash-0731.json")
    assert f"{flash0731.residue_accuracy[0]:.1%}" == "80.5%"
    base = load_profile(builtin_profile_dir() / "deepseek-v4-flash-base.json")
    assert f"{min(base.residue_accuracy):.1%}" == "29.7%"
    assert f"{max(base.residue_accuracy):.1%}" == "69.9%"


def test_flash_0731_length_effect() -> None:
    profile = load_profile(builtin_profile_dir() / "deepseek-v4-flash-0731.json")
    effect = profile.length_residue_accuracy
    assert effect is not None
    assert (effect.period, effect.accuracy, effect.kind) == (
        4,
        (None, None, None, 0.0),
        "field-report",
    )
    assert effect.source == "vLLM issue 55927"
    assert profile.length_factor(1003) == 0.0  # length ≡ 3 (mod 4): reported failing
    assert profile.length_factor(1000) == profile.length_factor(1001) == 1.0  # unknown: neutral
    others = [load_profile(p) for p in builtin_profile_dir().glob("*.json")]
    assert sum(p.length_residue_accuracy is not None for p in others) == 1


def test_files_are_exactly_what_the_generator_writes() -> None:
    rendered = load_generator().render_all()
    assert set(rendered) == {f"{name}.json" for name in PUBLISHED}
    for filename, text in rendered.items():
        shipped = (builtin_profile_dir() / filename).read_text(encoding="utf-8")
        assert shipped == text, f"{filename} is stale: run python scripts/make_builtin_profiles.py"


def test_generator_table_matches_brief() -> None:
    assert {k: (s, n, list(c)) for k, (s, n, c) in load_generator().PUBLISHED.items()} == PUBLISHED


def test_builtin_fingerprint_is_the_shipped_v4_tokenizer() -> None:
    from phaseaware.tokenizers import load_tokenizer

    assert load_tokenizer("deepseek-v4").fingerprint() == DEEPSEEK_V4_FINGERPRINT
