"""Import structure: no cycles between phaseaware's modules, and dependencies point one way.

Every ``import`` in ``phaseaware/`` counts, function-local and ``TYPE_CHECKING`` ones
included: a lazy import is still a dependency. The layers, lowest first, are the ones
ARCHITECTURE.md draws; a module may import its own layer's modules or lower ones only.
"""

from __future__ import annotations

import ast
from pathlib import Path

PACKAGE = Path(__file__).resolve().parents[2] / "phaseaware"

# top-level area (module or subpackage of phaseaware) -> layer; lower layers never import higher
LAYERS: dict[str, int] = {
    "errors": 0,
    "atomic": 0,
    "userfiles": 0,
    "redact": 0,
    "httpclient": 0,
    "intervals": 0,
    "serialize": 0,
    "version": 0,
    "charts": 0,
    "caches": 0,
    "extras": 0,
    "limits": 0,
    "regexes": 0,
    "plots": 0,
    "credentials": 0,
    "filelock": 0,
    "tokenizers": 1,
    "chat": 2,
    "profiles": 3,
    "assembly": 4,
    "audit": 5,
    "endpoints": 5,
    "calibration": 5,
    "scoring": 6,
    "reference": 6,
    "integrate": 6,
    "compare": 6,
    "demo": 7,
    "cli": 8,
    "__main__": 9,
    "__init__": 9,
}


# inside the core packages: sub-area (the next name after the area) -> layer, lowest first
INNER_LAYERS: dict[str, dict[str, int]] = {
    "assembly": {
        "plan": 0,  # pure planning over integers
        "retokenize": 0,
        "inputs": 1,
        "evidence": 2,
        "prepare": 3,
        "verify": 4,
        "report": 4,
        "pipeline": 6,
        "incremental": 7,
        "conversation": 7,
        "entry": 8,
        "__init__": 9,
    },
    "chat": {
        "errors": 0,
        "settings": 0,
        "messages": 1,
        "message_checks": 1,
        "hf_tools": 1,
        "hf_message_wise": 1,
        "prefix_renders": 1,
        "message_wise": 2,
        "deepseek_turns": 2,
        "deepseek_encoding": 2,
        "hf": 2,
        "untrusted": 2,
        "deepseek_v4": 3,
        "deepseek_v41": 4,
        "deepseek_recipe": 4,
        "formats": 5,
        "spans": 6,
        "layout": 6,
        "append": 7,
        "__init__": 9,
    },
    "calibration": {
        "task": 0,
        "backends": 1,
        "probe_settings": 1,
        "haystack": 2,
        "log": 2,
        "probes": 3,
        "stats": 3,
        "analysis": 4,
        "verdict": 4,
        "runner": 5,
        "lm_eval_task": 4,
        "report": 6,
        "batch_run": 6,
        "__init__": 9,
    },
}


def _module_name(path: Path) -> str:
    parts = list(path.relative_to(PACKAGE.parent).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts = parts[:-1]
    return ".".join(parts)


def _modules() -> dict[str, Path]:
    return {_module_name(p): p for p in PACKAGE.rglob("*.py") if "data" not in p.parts}


def _resolve(target: str, modules: dict[str, Path]) -> str | None:
    while target and target not in modules:
        target = target.rpartition(".")[0]
    return target or None


def _edges(modules: dict[str, Path]) -> dict[str, set[str]]:
    edges: dict[str, set[str]] = {name: set() for name in modules}
    for name, path in modules.items():
        is_pkg = path.name == "__init__.py"
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            targets: list[str] = []
            if isinstance(node, ast.Import):
                targets = [a.name for a in node.names]
            elif isinstance(node, ast.ImportFrom):
                base = node.module or ""
                if node.level:
                    anchor = name.split(".")
                    anchor = anchor if is_pkg else anchor[:-1]
                    anchor = anchor[: len(anchor) - (node.level - 1)]
                    base = ".".join([*anchor, base] if base else anchor)
                targets = [f"{base}.{a.name}" for a in node.names] or [base]
            for target in targets:
                if not target.startswith("phaseaware"):
                    continue
                resolved = _resolve(target, modules)
                if resolved and resolved != name:
                    edges[name].add(resolved)
    return edges


def _area(module: str) -> str:
    parts = module.split(".")
    return parts[1] if len(parts) > 1 else "__init__"


def test_no_import_cycles() -> None:
    edges = _edges(_modules())
    state: dict[str, int] = {}
    stack: list[str] = []
    cycles: list[list[str]] = []

    def visit(node: str) -> None:
        state[node] = 1
        stack.append(node)
        for nxt in sorted(edges[node]):
            if state.get(nxt) == 1:
                cycles.append([*stack[stack.index(nxt) :], nxt])
            elif nxt not in state:
                visit(nxt)
        stack.pop()
        state[node] = 2

    for node in sorted(edges):
        if node not in state:
            visit(node)
    assert not cycles, "import cycles:\n" + "\n".join(" -> ".join(c) for c in cycles)


def test_dependencies_point_down_the_layers() -> None:
    edges = _edges(_modules())
    unknown = sorted({_area(m) for m in edges} - LAYERS.keys())
    assert not unknown, f"add these areas to LAYERS (and ARCHITECTURE.md): {unknown}"
    upward = [
        f"{src} ({_area(src)}, layer {LAYERS[_area(src)]}) imports {dst} "
        f"({_area(dst)}, layer {LAYERS[_area(dst)]})"
        for src, targets in sorted(edges.items())
        for dst in sorted(targets)
        if LAYERS[_area(dst)] > LAYERS[_area(src)]
    ]
    assert not upward, "imports that point up a layer:\n" + "\n".join(upward)


def _inner(module: str) -> str:
    parts = module.split(".")
    return parts[2] if len(parts) > 2 else "__init__"


def test_dependencies_point_down_inside_core_packages() -> None:
    edges = _edges(_modules())
    problems = []
    for area, layers in INNER_LAYERS.items():
        inside = [m for m in edges if _area(m) == area]
        unknown = sorted({_inner(m) for m in inside} - layers.keys())
        problems += [f"add {area}.{u} to INNER_LAYERS (and ARCHITECTURE.md)" for u in unknown]
        problems += [
            f"{src} (layer {layers[_inner(src)]}) imports {dst} (layer {layers[_inner(dst)]})"
            for src in sorted(inside)
            if _inner(src) in layers
            for dst in sorted(edges[src])
            if _area(dst) == area
            and _inner(dst) in layers
            and layers[_inner(dst)] > layers[_inner(src)]
        ]
    assert not problems, "inner layers:\n" + "\n".join(problems)


def test_modules_stay_small() -> None:
    big = {
        name: n
        for name, path in _modules().items()
        if (n := len(path.read_text(encoding="utf-8").splitlines())) > 420
    }
    assert not big, f"modules over ~400 lines (split them by job): {big}"


def test_assembly_uses_tokenizer_capabilities_not_classes() -> None:
    """Speed paths ask declared protocols (``tokenizers.windowing``), never the concrete
    tokenizer adapters: a third-party tokenizer then takes a declared path, not a silent one."""
    concrete = {"phaseaware.tokenizers.hf", "phaseaware.tokenizers.tiktoken"}
    edges = _edges(_modules())
    offenders = sorted(
        f"{src} imports {dst}"
        for src, targets in edges.items()
        if _area(src) == "assembly"
        for dst in targets
        if dst in concrete
    )
    assert not offenders, "\n".join(offenders)


# the framework packages: each a tree of its own, importing the core's adapter surface only
INTEGRATIONS = PACKAGE.parent / "integrations"
ADAPTER_PACKAGES = {
    "langchain_phaseaware": INTEGRATIONS / "langchain" / "langchain_phaseaware",
    "llama_index.postprocessor.phaseaware": (
        INTEGRATIONS / "llama-index" / "llama_index" / "postprocessor" / "phaseaware"
    ),
    "llama_index.llms.phaseaware": (
        INTEGRATIONS / "llama-index-llms" / "llama_index" / "llms" / "phaseaware"
    ),
}
ADAPTER_SURFACE = {"phaseaware", "phaseaware.errors", "phaseaware.integrate"}


def _package_imports(name: str, root: Path) -> dict[str, set[str]]:
    """Module -> the modules it imports (absolute names, lazy imports included)."""
    modules = {
        ".".join([name, *p.relative_to(root).with_suffix("").parts]).removesuffix(".__init__"): p
        for p in root.rglob("*.py")
    }
    out: dict[str, set[str]] = {}
    for module, path in modules.items():
        found: set[str] = set()
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.Import):
                found.update(a.name for a in node.names)
            elif isinstance(node, ast.ImportFrom) and node.module and not node.level:
                found.add(node.module)
        out[module] = found
    return out


def _cycles(edges: dict[str, set[str]]) -> list[str]:
    state: dict[str, int] = {}
    found: list[str] = []

    def visit(node: str, stack: list[str]) -> None:
        state[node] = 1
        stack.append(node)
        for nxt in sorted(edges[node]):
            if state.get(nxt) == 1:
                found.append(" -> ".join([*stack[stack.index(nxt) :], nxt]))
            elif nxt not in state:
                visit(nxt, stack)
        stack.pop()
        state[node] = 2

    for node in sorted(edges):
        if node not in state:
            visit(node, [])
    return found


def test_adapter_packages_have_no_cycles_and_use_the_kit_only() -> None:
    problems = []
    for name, root in ADAPTER_PACKAGES.items():
        imports = _package_imports(name, root)
        own = {m: {t for t in targets if t in imports and t != m} for m, targets in imports.items()}
        problems += [f"import cycle: {c}" for c in _cycles(own)]
        problems += [
            f"{module} imports {t}; adapters import only {sorted(ADAPTER_SURFACE)}"
            for module, targets in sorted(imports.items())
            for t in sorted(targets)
            if t.split(".")[0] == "phaseaware" and t not in ADAPTER_SURFACE
        ]
    assert not problems, "\n".join(problems)
