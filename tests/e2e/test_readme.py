"""The README runs as written: its Python and shell blocks, and every flag it names.

Blocks that need an external server, an install or minutes of work are listed in
``NOT_RUN_HERE`` with the test that covers them instead; everything else runs.
"""

from __future__ import annotations

import argparse
import os
import re
import shlex
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
README = ROOT / "README.md"
# A real calibration of the reference model, committed with the LlamaIndex tests: the file
# `phaseaware demo` writes to phaseaware-demo/phaseaware-reference.json.
REFERENCE_PROFILE = ROOT / "integrations/llama-index/tests/data/phaseaware-reference.json"

# command prefix -> why it is not run here (and what covers it)
NOT_RUN_HERE = {
    "python3 -m venv": "makes a virtual environment (the suite runs inside one already)",
    ". .venv/bin/activate": "activates that environment",
    "pip install": "installs packages (scripts/test.sh is the install this suite runs under)",
    "bash scripts/test.sh": "is this suite",
    "phaseaware probe-endpoint": "needs a server (tests/e2e/test_endpoints_http.py, vLLM tier)",
}


def _blocks(language: str) -> list[str]:
    text = README.read_text(encoding="utf-8")
    return re.findall(rf"^```{language}\n(.*?)^```", text, flags=re.S | re.M)


def _commands() -> list[str]:
    """Every shell command of the README's bash blocks (continuations joined, ``&&`` split)."""
    out = []
    for block in _blocks("bash"):
        for line in block.replace("\\\n", " ").splitlines():
            line = line.split(" #")[0].strip()
            if line and not line.startswith("#"):
                out.extend(part.strip() for part in line.split("&&"))
    return out


def _inline_phaseaware_commands() -> list[list[str]]:
    """Every ``phaseaware CMD ...`` the README names, in blocks or inline code."""
    text = README.read_text(encoding="utf-8").replace("\\\n", " ")
    found = re.findall(r"`(phaseaware [^`]+)`", text)
    found += [c for c in _commands() if c.startswith("phaseaware ")]
    return [shlex.split(c) for c in found]


def test_the_readme_has_blocks_to_run():
    assert _blocks("python") and _commands()
    assert len(README.read_text(encoding="utf-8").splitlines()) <= 250


def test_every_flag_the_readme_names_exists_on_its_command():
    from phaseaware.cli.main import build_parser

    parser = build_parser()
    sub = next(a for a in parser._actions if isinstance(a, argparse._SubParsersAction))
    for argv in _inline_phaseaware_commands():
        if len(argv) < 2 or argv[1].startswith("-"):
            continue
        assert argv[1] in sub.choices, f"README names `phaseaware {argv[1]}`, no such command"
        known = set(sub.choices[argv[1]]._option_string_actions)
        for word in argv[2:]:
            flag = word.split("=")[0]
            if flag.startswith("--"):
                assert flag in known, f"README: `phaseaware {argv[1]}` has no flag {flag}"


def test_the_python_example_runs_as_written(tmp_path):
    pytest.importorskip("transformers")
    (tmp_path / "phaseaware-demo").mkdir()
    shutil.copy(REFERENCE_PROFILE, tmp_path / "phaseaware-demo" / "phaseaware-reference.json")
    for block in _blocks("python"):
        script = tmp_path / "example.py"
        script.write_text(block, encoding="utf-8")
        out = subprocess.run(
            [sys.executable, str(script)],
            cwd=tmp_path,
            capture_output=True,
            text=True,
            timeout=300,
            env={**os.environ, "PYTHONPATH": str(ROOT)},
        )
        assert out.returncode == 0, out.stderr[-2000:]
        assert "tokens;" in out.stdout


def test_the_shell_commands_run_as_written():
    ran = 0
    for command in _commands():
        if any(command.startswith(prefix) for prefix in NOT_RUN_HERE):
            continue
        if command == "phaseaware demo":  # minutes of work: tests/e2e/test_demo_cli.py
            continue
        argv = shlex.split(command)
        assert argv[0] == "phaseaware", f"README command not classified: {command}"
        out = subprocess.run(
            [sys.executable, "-m", "phaseaware", *argv[1:]],
            cwd=ROOT,
            capture_output=True,
            text=True,
            timeout=300,
            env={**os.environ, "PYTHONPATH": str(ROOT)},
        )
        assert out.returncode == 0, (command, out.stderr[-2000:])
        ran += 1
    assert ran >= 1
