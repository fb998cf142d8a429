"""examples/llama_index_agent.py runs offline (loopback stand-in server) and answers right."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

pytest.importorskip("llama_index.llms.openai_like")

ROOT = Path(__file__).resolve().parents[4]
EXAMPLE = ROOT / "examples" / "llama_index_agent.py"


def test_llama_index_agent_example_answers_and_keeps_sent_bytes():
    env = dict(os.environ, HF_HUB_OFFLINE="1", TRANSFORMERS_OFFLINE="1")
    env["PYTHONPATH"] = os.pathsep.join(
        [
            str(ROOT),
            str(ROOT / "integrations" / "llama-index"),
            str(ROOT / "integrations" / "llama-index-llms"),
            env.get("PYTHONPATH", ""),
        ]
    )
    done = subprocess.run(
        [sys.executable, str(EXAMPLE)], capture_output=True, text=True, env=env, timeout=300
    )
    assert done.returncode == 0, done.stdout + done.stderr
    assert done.stdout.count(" OK; ") == 3
    assert "the bytes sent before each tool result unchanged: True" in done.stdout
