"""The shipped reference model served over loopback HTTP (``serve-reference``'s server,
in process), its shipped profile, and the benchmark and example modules loaded by path.

The profile in ``tests/data/phaseaware-reference.json`` was written by ``phaseaware
calibrate`` on the reference model (the LlamaIndex package's tests use the same file).
"""

from __future__ import annotations

import importlib.util
import sys
from collections.abc import Iterator
from pathlib import Path
from types import ModuleType

import pytest

torch = pytest.importorskip("torch")
pytest.importorskip("transformers")

ROOT = Path(__file__).resolve().parents[4]
PROFILE = Path(__file__).resolve().parents[1] / "data" / "phaseaware-reference.json"


@pytest.fixture(scope="session")
def base_url() -> Iterator[str]:
    from phaseaware.reference.engine import ReferenceEngine
    from phaseaware.reference.load import load_reference
    from phaseaware.reference.server import start_server

    torch.set_num_threads(1)
    model, tok = load_reference("cpu")
    with start_server(ReferenceEngine(model, tok), host="127.0.0.1", port=0) as server:
        yield server.base_url


@pytest.fixture(scope="session")
def profile_path() -> str:
    return str(PROFILE)


def load_module(path: Path, name: str, monkeypatch: pytest.MonkeyPatch) -> ModuleType:
    """``path`` imported as ``name`` (its folder first on ``sys.path``, undone after)."""
    monkeypatch.syspath_prepend(str(path.parent))
    spec = importlib.util.spec_from_file_location(name, path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    monkeypatch.setitem(sys.modules, name, module)
    spec.loader.exec_module(module)
    return module


@pytest.fixture
def bench(monkeypatch: pytest.MonkeyPatch) -> ModuleType:
    return load_module(ROOT / "benchmarks" / "haystack_rag.py", "haystack_rag_bench", monkeypatch)


@pytest.fixture
def example(monkeypatch: pytest.MonkeyPatch) -> ModuleType:
    return load_module(ROOT / "examples" / "haystack_rag.py", "haystack_rag", monkeypatch)
