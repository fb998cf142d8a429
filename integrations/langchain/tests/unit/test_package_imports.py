"""Imports: the core stays LangChain-free; the package exports ``__all__`` lazily."""

from __future__ import annotations

import json
import subprocess
import sys

import langchain_phaseaware

EXPECTED = [
    "PhaseAwareCompressor",
    "PhaseAwareMiddleware",
    "PhaseAwarePrompt",
    "PhaseAwarePromptWithReport",
    "PhaseAwareReorder",
    "PhaseAwareUsageCheck",
    "__version__",
    "document_chunks",
    "placement_report",
    "prompt_ids_clients",
]


def _modules_after(statement: str) -> list[str]:
    code = f"import sys, json; {statement}; print(json.dumps(sorted(sys.modules)))"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    return json.loads(out.stdout.strip().splitlines()[-1])


def test_all_is_the_public_surface_and_resolves():
    assert sorted(langchain_phaseaware.__all__) == EXPECTED
    for name in langchain_phaseaware.__all__:
        assert getattr(langchain_phaseaware, name) is not None
    assert dir(langchain_phaseaware) == EXPECTED


def test_import_phaseaware_alone_imports_no_langchain():
    loaded = _modules_after("import phaseaware; phaseaware.Chunk; phaseaware.assemble")
    assert not [m for m in loaded if m.startswith(("langchain", "langgraph", "langsmith"))]


def test_import_langchain_phaseaware_is_lazy():
    loaded = _modules_after("import langchain_phaseaware")
    assert "langchain_phaseaware.middleware" not in loaded
    assert not [m for m in loaded if m == "langchain" or m.startswith(("langchain.", "langgraph"))]
    assert "transformers" not in loaded and "torch" not in loaded


def test_the_adapter_imports_only_public_phaseaware_names():
    """``phaseaware`` (its ``__all__``), ``phaseaware.errors`` and the kit: nothing deeper."""
    import ast
    from pathlib import Path

    allowed = {"phaseaware", "phaseaware.errors", "phaseaware.integrate"}
    package = Path(langchain_phaseaware.__file__).parent
    seen = set()
    for path in package.glob("*.py"):
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.ImportFrom) and (node.module or "").startswith("phaseaware"):
                seen.add(node.module)
            if isinstance(node, ast.Import):
                seen |= {a.name for a in node.names if a.name.startswith("phaseaware")}
    assert seen <= allowed, sorted(seen - allowed)
