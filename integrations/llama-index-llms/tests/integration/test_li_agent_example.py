"""examples/llama_index_agent.py runs against ``phaseaware serve-reference`` and answers right.

The example starts the server itself (the shipped reference model on 127.0.0.1), runs the
agent with a scripted first tool call and the real tool, and checks its answers and that
the aligned tool result reached the server byte for byte again with the follow-up.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

pytest.importorskip("llama_index.llms.openai_like")
pytest.importorskip("rank_bm25")
pytest.importorskip("torch")
pytestmark = [pytest.mark.slow, pytest.mark.needs_trained_reference]

ROOT = Path(__file__).resolve().parents[4]
EXAMPLE = ROOT / "examples" / "llama_index_agent.py"
PROFILE = ROOT / "integrations" / "llama-index" / "tests" / "data" / "phaseaware-reference.json"


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
        [sys.executable, str(EXAMPLE), "--profile", str(PROFILE)],
        capture_output=True, text=True, env=env, timeout=300,
    )  # fmt: skip
    assert done.returncode == 0, done.stdout + done.stderr
    assert done.stdout.count(": OK)") == 2
    assert "aligned tool result resent byte for byte: True" in done.stdout
