"""Importing the core must stay light: no torch, transformers or openai at import time."""

from __future__ import annotations

import subprocess
import sys

HEAVY = ("torch", "transformers", "openai", "tokenizers", "safetensors", "scipy")


def test_core_import_is_light() -> None:
    code = (
        "import sys, phaseaware, phaseaware.cli.main as m; m.build_parser();"
        f"print(','.join(x for x in {HEAVY!r} if x in sys.modules))"
    )
    out = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, check=True
    ).stdout.strip()
    assert out == "", f"heavy modules imported at import time: {out}"


def test_cli_help_exits_zero() -> None:
    proc = subprocess.run(
        [sys.executable, "-m", "phaseaware", "--help"], capture_output=True, text=True
    )
    assert proc.returncode == 0
    assert "phaseaware" in proc.stdout


def test_cli_without_command_is_usage_error() -> None:
    proc = subprocess.run([sys.executable, "-m", "phaseaware"], capture_output=True, text=True)
    assert proc.returncode == 2


def test_public_names_resolve() -> None:
    import phaseaware

    for name in phaseaware.__all__:
        assert getattr(phaseaware, name) is not None, name


def test_all_lists_every_lazy_export() -> None:
    import phaseaware

    assert sorted(phaseaware._EXPORTS) == sorted(set(phaseaware.__all__) - {"__version__"})
