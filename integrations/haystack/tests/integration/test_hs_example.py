"""``examples/haystack_rag.py`` on the examples' pattern, in process against the session's
reference server: ``--help`` names its flags and defaults, ``--profile`` defaults to the
profile ``phaseaware demo`` wrote, and without one the example calibrates in a temporary
folder that is gone when it ends. (A dead ``--base-url`` and a missing package, run as a
user runs the example: tests/e2e/test_examples_fail.py.)"""

from __future__ import annotations

import shutil
import tempfile
from pathlib import Path
from typing import Any

import pytest

pytestmark = [pytest.mark.slow, pytest.mark.needs_trained_reference]


def test_help_names_the_shared_flags_and_their_defaults(
    example: Any, capsys: pytest.CaptureFixture[str]
) -> None:
    with pytest.raises(SystemExit) as done:
        example.main(["--help"])
    assert done.value.code == 0
    out = capsys.readouterr().out
    for flag in ("--base-url", "--profile", "--questions"):
        assert flag in out, out
    assert "phaseaware demo" in out and "default 4" in out


def test_the_demos_profile_is_the_default(
    example: Any,
    base_url: str,
    profile_path: str,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    demo = tmp_path / "phaseaware-demo" / "phaseaware-reference.json"
    demo.parent.mkdir()
    shutil.copy(profile_path, demo)
    monkeypatch.chdir(tmp_path)  # the demo writes its folder where it runs
    assert example.main(["--base-url", base_url, "--questions", "1"]) == 0
    out, err = capsys.readouterr()
    assert "1 of 1 answers right" in out, out
    assert "using the profile `phaseaware demo` wrote" in err and "calibrating" not in err


def test_without_a_profile_it_calibrates_and_leaves_no_folder(
    example: Any,
    base_url: str,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    temp = tmp_path / "temp"
    temp.mkdir()
    monkeypatch.setattr(tempfile, "tempdir", str(temp))
    monkeypatch.chdir(tmp_path)  # no demo profile here
    assert example.main(["--base-url", base_url, "--questions", "1"]) == 0
    out, err = capsys.readouterr()
    assert "1 of 1 answers right" in out, out
    assert "calibrating the reference model" in err
    assert list(temp.iterdir()) == []
