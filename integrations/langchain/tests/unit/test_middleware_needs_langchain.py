"""``PhaseAwareMiddleware`` without ``langchain`` installed: an ImportError naming the install
(it was a bare ``ModuleNotFoundError``; issue 38)."""

from __future__ import annotations

import subprocess
import sys

SCRIPT = """
import sys
sys.modules["langchain"] = None  # as if only langchain-core were installed
import langchain_phaseaware
try:
    langchain_phaseaware.PhaseAwareMiddleware
except ImportError as exc:
    print(type(exc).__name__, exc)
langchain_phaseaware.PhaseAwareReorder  # the rest of the package still loads
print("reorder ok")
"""


def test_middleware_without_langchain_names_the_install():
    out = subprocess.run(
        [sys.executable, "-c", SCRIPT], capture_output=True, text=True, check=True
    ).stdout
    assert out.splitlines()[0].startswith("ImportError PhaseAwareMiddleware needs the langchain")
    assert "pip install 'langchain-phaseaware[agents]'" in out
    assert "reorder ok" in out
