"""The examples fail like the command line: one line that says what to run, exit 1.

Each example runs as a user runs it (``python examples/NAME.py``) in a subprocess with
no server listening, with a package missing (blocked by a ``sitecustomize`` on the path)
and with the reference extra missing (so ``serve-reference`` itself cannot start, and
its own message must reach the user).
"""

from __future__ import annotations

import os
import socket
import subprocess
import sys
import time
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
EXAMPLES = ROOT / "examples"
PROFILE = ROOT / "integrations/llama-index/tests/data/phaseaware-reference.json"
SERVED = [
    "langchain_rag",
    "langchain_agent",
    "langchain_stream",
    "llama_index_rag",
    "llama_index_stream",
    "haystack_rag",
]
PATHS = [str(ROOT), str(ROOT / "integrations/langchain"), str(ROOT / "integrations/llama-index"),
         str(ROOT / "integrations/llama-index-llms"),
         str(ROOT / "integrations/haystack/src")]  # fmt: skip


def _closed_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])  # closed again when the block ends


def _run(name: str, *args: str, block: tuple[str, ...] = (), tmp_path: Path) -> tuple[int, str]:
    paths = list(PATHS)
    if block:
        site = tmp_path / "block"
        site.mkdir(exist_ok=True)
        lines = [f"sys.modules[{m!r}] = None" for m in block]
        (site / "sitecustomize.py").write_text("import sys\n" + "\n".join(lines) + "\n")
        paths.insert(0, str(site))
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(paths), "HF_HUB_OFFLINE": "1"}
    out = subprocess.run(
        [sys.executable, str(EXAMPLES / f"{name}.py"), *args],
        capture_output=True,
        text=True,
        timeout=300,
        env=env,
        cwd=ROOT,
    )
    return out.returncode, out.stderr


def _needs(*modules: str) -> None:
    for module in modules:
        pytest.importorskip(module)


@pytest.mark.parametrize("name", SERVED)
def test_no_server_is_one_line(name, tmp_path):
    _needs("rank_bm25", "langchain_openai", "llama_index.llms.openai_like", "langchain.agents")
    url = f"http://127.0.0.1:{_closed_port()}/v1"
    args = ["--base-url", url, "--profile", str(PROFILE)]
    started = time.monotonic()
    code, err = _run(name, *args, tmp_path=tmp_path)
    assert code == 1
    assert err.count("\n") == 1, err
    assert "cannot reach the model server" in err and "serve-reference" in err
    assert time.monotonic() - started < 30  # checked before any slow work (5 s on a quiet machine)


@pytest.mark.parametrize(
    "name, module, install",
    [
        ("langchain_rag", "langchain_openai", "integrations/langchain[examples]"),
        ("langchain_agent", "rank_bm25", "pip install rank-bm25"),
        ("llama_index_rag", "llama_index.llms.openai_like", "llama-index-llms-openai-like"),
        ("llama_index_agent", "llama_index.llms.phaseaware", "integrations/llama-index-llms"),
        ("haystack_rag", "haystack", "pip install -e integrations/haystack"),
        ("haystack_rag", "haystack_integrations", "pip install -e integrations/haystack"),
    ],
)
def test_a_missing_package_is_one_line_naming_its_install(name, module, install, tmp_path):
    # the example's other packages must be there, so the blocked one is the first it misses
    needed = {
        "langchain_rag": ("langchain_core", "langchain_openai", "rank_bm25"),
        "langchain_agent": ("langchain.agents", "langchain_openai", "rank_bm25"),
        "llama_index_rag": ("llama_index.core", "llama_index.llms.openai_like", "rank_bm25"),
        "llama_index_agent": ("llama_index.core", "llama_index.llms.phaseaware", "rank_bm25"),
        "haystack_rag": ("haystack", "haystack_integrations.components.builders.phaseaware"),
    }[name]
    _needs(*(m for m in needed if m != module))
    code, err = _run(name, block=(module,), tmp_path=tmp_path)
    assert code == 1
    assert err.count("\n") == 1, err
    assert install in err


@pytest.mark.slow
def test_the_servers_own_message_is_shown_when_it_cannot_start(tmp_path):
    """Without torch, serve-reference refuses with its own one-line fix; the example shows it."""
    _needs("rank_bm25", "llama_index.llms.openai_like")
    code, err = _run("llama_index_rag", block=("torch",), tmp_path=tmp_path)
    assert code == 1
    assert err.count("\n") == 1, err
    assert err.startswith("serve-reference did not start:")
    assert "torch" in err and "pip install" in err
