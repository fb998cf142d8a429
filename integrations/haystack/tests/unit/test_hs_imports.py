"""Packaging: Haystack's namespace layout, the public names, and no work at import."""

from __future__ import annotations

import ast
import json
import subprocess
import sys
from pathlib import Path

SRC = Path(__file__).resolve().parents[2] / "src"
PACKAGES = {
    "haystack_integrations.components.builders.phaseaware": ["PhaseAwareChatPromptBuilder"],
    "haystack_integrations.components.rankers.phaseaware": ["PhaseAwareRanker"],
    "haystack_integrations.components.validators.phaseaware": ["PhaseAwareUsageCheck"],
}


def _modules_after(statement: str) -> list[str]:
    code = f"import sys, json; {statement}; print(json.dumps(sorted(sys.modules)))"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    return list(json.loads(out.stdout.strip().splitlines()[-1]))


def test_each_component_package_exports_its_component() -> None:
    import importlib

    for name, expected in PACKAGES.items():
        module = importlib.import_module(name)
        assert sorted(module.__all__) == expected
        assert Path(module.__file__ or "").resolve().is_relative_to(SRC)
        assert all(getattr(module, n) is not None for n in module.__all__)


def test_namespace_packages_have_no_init_above_them() -> None:
    assert not (SRC / "haystack_integrations" / "__init__.py").exists()
    assert not (SRC / "haystack_integrations" / "components" / "__init__.py").exists()
    for kind in ("builders", "rankers", "validators"):
        assert not (SRC / "haystack_integrations" / "components" / kind / "__init__.py").exists()


def test_importing_the_components_loads_no_model_or_tokenizer() -> None:
    """Beyond what ``import haystack`` loads itself (which may include torch)."""
    haystack_alone = set(_modules_after("import haystack; import haystack.components.builders"))
    names = "; ".join(f"import {name}" for name in PACKAGES)
    added = set(_modules_after(names)) - haystack_alone
    assert not {"torch", "transformers", "tiktoken", "tokenizers"} & added


def test_construction_loads_nothing_and_warm_up_loads_the_tokenizer() -> None:
    code = (
        "import sys, json; "
        "from haystack_integrations.components.builders.phaseaware import "
        "PhaseAwareChatPromptBuilder as B; "
        "from haystack_integrations.components.rankers.phaseaware import PhaseAwareRanker as R; "
        "t = '{% for d in documents %}{{ d.content }}{% endfor %} {{ question }}'; "
        "b = B(t, tokenizer='tiktoken:o200k_base', chat_format='chatml', profile=None, "
        "budget_tokens=99); "
        "r = R(profile='deepseek-v4-flash-base', token_budget=9, tokenizer='tiktoken:o200k_base'); "
        "before = 'tiktoken' in sys.modules; b.warm_up(); r.warm_up(); "
        "print(json.dumps([before, 'tiktoken' in sys.modules]))"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert json.loads(out.stdout.strip().splitlines()[-1]) == [False, True]


def test_import_phaseaware_alone_imports_no_haystack() -> None:
    loaded = _modules_after("import phaseaware; phaseaware.Chunk; phaseaware.assemble")
    assert not [m for m in loaded if m.startswith(("haystack", "haystack_integrations"))]


def test_the_adapter_imports_only_public_phaseaware_names() -> None:
    """``phaseaware`` (its ``__all__``), ``phaseaware.errors`` and the kit: nothing deeper."""
    allowed = {"phaseaware", "phaseaware.errors", "phaseaware.integrate"}
    seen = set()
    for path in (SRC / "haystack_integrations").rglob("*.py"):
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.ImportFrom) and (node.module or "").startswith("phaseaware"):
                seen.add(node.module)
            if isinstance(node, ast.Import):
                seen |= {a.name for a in node.names if a.name.startswith("phaseaware")}
    assert seen and seen <= allowed, sorted(seen - allowed)
