"""`phaseaware profile ...` through the real entry point."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from phaseaware.cli.main import main
from phaseaware.profiles.registry import builtin_profile_dir


@pytest.fixture(autouse=True)
def isolated_home(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.setenv("PHASEAWARE_HOME", str(tmp_path / "home"))
    monkeypatch.delenv("PHASEAWARE_PROFILE_PATH", raising=False)
    monkeypatch.chdir(tmp_path)
    (tmp_path / "bad.json").write_text('{"schema": "phaseaware.profile/v1", "model": "x"}')
    (tmp_path / "notjson.json").write_text("{oops")
    good = (builtin_profile_dir() / "deepseek-v4-pro-base.json").read_text(encoding="utf-8")
    (tmp_path / "good.json").write_text(good, encoding="utf-8")
    return tmp_path / "home"


CASES = [
    (["profile", "list"], 0, "deepseek-v4-flash-base  builtin"),
    (["profile", "list"], 0, "deepseek-v4.1-flash"),
    (["profile", "show", "deepseek-v4-flash-base", "--json"], 0, '"n": [256, 256'),
    (["profile", "show", "deepseek-v4-flash-base"], 0, "worst: r=3 29.7%   best: r=5 69.9%"),
    (
        ["profile", "show", "deepseek-ai/DeepSeek-V4-Flash-0731"],
        0,
        "  0     80.5%      75.2%–84.9%     256",
    ),
    (["profile", "show", "deepseek-v4-flash-0731"], 0, "length ≡ 3 (mod 4): 0.0%"),
    (["profile", "show", "good.json"], 0, "model:     deepseek-v4-pro-base"),
    (["profile", "show", "nope"], 1, "run `phaseaware calibrate --model nope`"),
    (["profile", "show", "missing.json"], 1, "profile file missing.json does not exist"),
    (["profile", "show", "bad.json"], 1, "missing key 'period'"),
    (
        ["profile", "validate", "good.json"],
        0,
        "ok: good.json: model deepseek-v4-pro-base, period 8",
    ),
    (["profile", "validate", "bad.json"], 1, "- missing key 'residue_accuracy'"),
    (["profile", "validate", "notjson.json"], 1, "is not valid JSON"),
    (["profile", "validate", "missing.json"], 1, "does not exist"),
    (["profile"], 2, "required: SUBCOMMAND"),
    ([], 2, "required: COMMAND"),
    (["profile", "show"], 2, "required: NAME"),
    (["profile", "frobnicate"], 2, "invalid choice"),
]


@pytest.mark.parametrize(
    ("args", "code", "fragment"), CASES, ids=[" ".join(c[0]) or "-" for c in CASES]
)
def test_profile_cli(
    args: list[str], code: int, fragment: str, capsys: pytest.CaptureFixture
) -> None:
    try:
        got = main(args)
    except SystemExit as exc:  # argparse usage errors
        got = exc.code
    out, err = capsys.readouterr()
    assert got == code, (out, err)
    assert fragment in out + err
    if code == 1 and "validate" not in args:
        assert err.startswith("phaseaware: error: ") and err.count("\n") == 1


def test_show_json_is_the_stored_document(capsys: pytest.CaptureFixture) -> None:
    assert main(["profile", "show", "deepseek-v4-flash-base-fp8", "--json"]) == 0
    out = capsys.readouterr().out
    stored = (builtin_profile_dir() / "deepseek-v4-flash-base.json").read_text(encoding="utf-8")
    assert out == stored
    doc = json.loads(out)
    assert doc["residue_accuracy"][0] * doc["n"][0] == 112


def test_list_shows_user_profiles_and_invalid_ones(
    isolated_home: Path, capsys: pytest.CaptureFixture
) -> None:
    folder = isolated_home / "profiles"
    folder.mkdir(parents=True)
    (folder / "broken.json").write_text("{")
    (folder / "deepseek-v4-flash-base.json").write_text(
        (builtin_profile_dir() / "deepseek-v4-pro-base.json").read_text(encoding="utf-8"),
        encoding="utf-8",
    )
    assert main(["profile", "list"]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert lines[0].split() == ["NAME", "ORIGIN", "MODEL", "PERIOD", "SOURCE"]
    broken = next(line for line in lines if line.startswith("broken"))
    assert "user" in broken and "INVALID" in broken
    shadowed = next(line for line in lines if line.startswith("deepseek-v4-flash-base"))
    assert shadowed.split()[1:3] == ["user", "deepseek-v4-pro-base"]


def test_build_without_calibration_support(monkeypatch: pytest.MonkeyPatch, capsys) -> None:
    import sys

    monkeypatch.setitem(sys.modules, "phaseaware.calibration.runner", None)  # import -> ImportError
    assert main(["profile", "build", "run.log"]) == 1
    assert "phaseaware.calibration.runner is unavailable" in capsys.readouterr().err


def test_build_writes_profile(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys) -> None:
    import sys
    import types

    from phaseaware.profiles.io import load_profile

    fake = types.ModuleType("phaseaware.calibration.runner")
    seen = []

    def build_profile_from_log(log_path):
        seen.append(log_path)
        return load_profile(builtin_profile_dir() / "deepseek-v4-pro-0813.json")

    fake.build_profile_from_log = build_profile_from_log
    monkeypatch.setitem(sys.modules, "phaseaware.calibration.runner", fake)
    assert main(["profile", "build", "run.log", "-o", str(tmp_path / "out.json")]) == 0
    assert seen == ["run.log"]
    assert "wrote" in capsys.readouterr().out
    assert load_profile(tmp_path / "out.json").model == "deepseek-v4-pro-0813"
    assert main(["profile", "build", "run.log"]) == 0
    assert json.loads(capsys.readouterr().out)["model"] == "deepseek-v4-pro-0813"


def test_show_measured_profile_with_unknowns(tmp_path: Path, capsys) -> None:
    from phaseaware.profiles.io import save_profile
    from phaseaware.profiles.model import Profile, Provenance, TokenizerRef

    profile = Profile(
        model="toy",
        period=2,
        residue_accuracy=(0.25, 1.0),
        n=(4, None),
        ci_low=(0.045587, None),
        ci_high=(0.699358, None),
        tokenizer=TokenizerRef(spec="tiktoken:cl100k_base", fingerprint="sha256:ab"),
        local_window=None,
        provenance=Provenance("measured", "unit test", "toy", "2026-12-02", "0.1.0"),
        reliability=(0.3, 0.9),
    )
    path = save_profile(profile, tmp_path / "toy.json")
    assert main(["profile", "show", str(path)]) == 0
    out = capsys.readouterr().out
    assert "  0     25.0%       4.6%–69.9%       4        30.0%" in out
    assert "  1    100.0%              n/a       ?        90.0%" in out
    assert "stride:    unknown" in out and "fingerprint sha256:ab" in out
    assert "gap: 75.0 points" in out
    # a measured raw window is shown beside its size
    import dataclasses

    from phaseaware.profiles.model import LocalWindowEffect

    window = LocalWindowEffect(
        accuracy=0.775, n=160, ci_low=0.704, ci_high=0.833, min_distance=13, max_distance=16,
        source="window sweep",
    )  # fmt: skip
    measured = dataclasses.replace(profile, local_window=16, local_window_accuracy=window)
    path = save_profile(measured, tmp_path / "toy-window.json")
    assert main(["profile", "show", str(path)]) == 0
    out = capsys.readouterr().out
    assert "window:    16 raw tokens before the query; 77.5% there [70.4%–83.3%], n = 160" in out
