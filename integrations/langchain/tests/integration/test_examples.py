"""Both examples run offline end to end (the session's profile, to skip calibrating).

Each starts its own server subprocess and loads the model again (about a minute each on
2 busy cores), so they run when ``PHASEAWARE_EXAMPLE_TESTS=1`` is set, not by default.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

pytestmark = [
    pytest.mark.slow,
    pytest.mark.skipif(
        os.environ.get("PHASEAWARE_EXAMPLE_TESTS") != "1",
        reason="set PHASEAWARE_EXAMPLE_TESTS=1 to run the examples (about 2 minutes)",
    ),
]

ROOT = Path(__file__).resolve().parents[4]


@pytest.mark.parametrize(
    ("script", "expect"),
    [
        ("langchain_rag.py", "usage.prompt_tokens checked"),
        ("langchain_agent.py", "aligned tool result resent byte for byte: True"),
    ],
)
def test_example_runs_offline(reference_profile, tmp_path, script, expect):
    from phaseaware.profiles.io import save_profile

    profile = tmp_path / "reference.json"
    save_profile(reference_profile, profile)
    paths = [str(ROOT), str(ROOT / "integrations" / "langchain"), os.environ.get("PYTHONPATH", "")]
    env = dict(os.environ, PYTHONPATH=os.pathsep.join(p for p in paths if p), HF_HUB_OFFLINE="1")
    args = [sys.executable, str(ROOT / "examples" / script), "--profile", str(profile)]
    if script == "langchain_rag.py":
        args += ["--questions", "2"]
    proc = subprocess.run(args, capture_output=True, text=True, env=env, timeout=300)
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert expect in proc.stdout
    assert "key positions" in proc.stdout
