"""Packaging: the namespace package resolves, its __all__ is exact, and the core stays
free of LlamaIndex (``import phaseaware`` imports no llama_index module)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

PACKAGE = Path(__file__).resolve().parents[2]


def test_all_is_the_public_api() -> None:
    import llama_index.postprocessor.phaseaware as pkg

    assert sorted(pkg.__all__) == sorted(
        [
            "ASSEMBLY_KEY",
            "PLACEMENT_KEY",
            "PhaseAwareNode",
            "PhaseAwarePostprocessor",
            "PhaseAwareReorder",
            "PhaseAwareSynthesizer",
            "PlanSent",
            "RepackWarning",
            "SENT_KEY",
            "phaseaware_query_engine",
            "text_qa_conversation",
        ]
    )
    for name in pkg.__all__:
        assert getattr(pkg, name) is not None


def test_namespace_package_has_no_init_above_it() -> None:
    assert not (PACKAGE / "llama_index" / "__init__.py").exists()
    assert not (PACKAGE / "llama_index" / "postprocessor" / "__init__.py").exists()
    import llama_index.core
    import llama_index.postprocessor.phaseaware as pkg

    assert Path(pkg.__file__).resolve().is_relative_to(PACKAGE)  # ours, beside site-packages'
    assert llama_index.core.__file__ is not None


def test_import_phaseaware_alone_imports_no_llama_index() -> None:
    code = (
        "import sys, phaseaware, phaseaware.assembly, phaseaware.endpoints;"
        "print(','.join(m for m in sys.modules if m.split('.')[0] == 'llama_index'))"
    )
    out = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, check=True
    ).stdout.strip()
    assert out == "", f"llama_index modules imported by the core: {out}"


def test_core_source_never_mentions_llama_index() -> None:
    import phaseaware

    core = Path(phaseaware.__file__).parent
    offenders = [
        str(p.relative_to(core))
        for p in core.rglob("*.py")
        if "import llama_index" in p.read_text() or "from llama_index" in p.read_text()
    ]
    assert offenders == []


def test_the_adapter_imports_only_public_phaseaware_names() -> None:
    """``phaseaware`` (its ``__all__``), ``phaseaware.errors`` and the kit: nothing deeper."""
    import ast

    import llama_index.postprocessor.phaseaware as pkg

    allowed = {"phaseaware", "phaseaware.errors", "phaseaware.integrate"}
    seen: set[str] = set()
    for path in Path(pkg.__file__).parent.glob("*.py"):
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.ImportFrom) and (node.module or "").startswith("phaseaware"):
                seen.add(node.module or "")
            if isinstance(node, ast.Import):
                seen |= {a.name for a in node.names if a.name.startswith("phaseaware")}
    assert seen <= allowed, sorted(seen - allowed)


def test_the_agent_llm_moved_to_its_own_package_and_the_old_name_says_where() -> None:
    import llama_index.postprocessor.phaseaware as pkg

    with pytest.raises(ImportError, match="pip install -e integrations/llama-index-llms"):
        pkg.PhaseAwareAgentLLM  # noqa: B018
    with pytest.raises(ImportError, match="from llama_index.llms.phaseaware import retriever_tool"):
        from llama_index.postprocessor.phaseaware import retriever_tool  # noqa: F401
