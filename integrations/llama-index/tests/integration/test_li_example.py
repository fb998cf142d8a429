"""examples/llama_index_rag.py runs offline against the reference server and answers."""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path

import pytest

pytest.importorskip("rank_bm25")
pytestmark = [pytest.mark.slow, pytest.mark.needs_trained_reference]

EXAMPLE = Path(__file__).resolve().parents[4] / "examples" / "llama_index_rag.py"
PROFILE = Path(__file__).resolve().parents[1] / "data" / "phaseaware-reference.json"


def test_example_answers_and_prints_where_evidence_landed(served, capsys, monkeypatch) -> None:
    server, _ = served
    monkeypatch.syspath_prepend(str(EXAMPLE.parent))  # its shared examples/reference_server.py
    spec = importlib.util.spec_from_file_location("llama_index_rag", EXAMPLE)
    module = importlib.util.module_from_spec(spec)
    sys.modules.setdefault("llama_index_rag", module)
    spec.loader.exec_module(module)
    assert module.main(["--base-url", server.base_url, "--profile", str(PROFILE)]) == 0
    out = capsys.readouterr().out
    assert "answer:   259  (expected 259: OK)" in out
    planned, counted = out.split("prompt:")[1].split("tokens planned; server counted")
    assert int(planned) == int(counted.split()[0])
    assert "valley-diary" in out and "residues" in out


def test_example_knows_every_answer_its_documents_hold() -> None:
    spec = importlib.util.spec_from_file_location("llama_index_rag_answers", EXAMPLE)
    module = importlib.util.module_from_spec(spec)
    sys.path.insert(0, str(EXAMPLE.parent))
    try:
        spec.loader.exec_module(module)
    finally:
        sys.path.remove(str(EXAMPLE.parent))
    assert module.EXPECTED == {
        "What is the access code for Priya ?": "317",
        "What is the access code for Hugo ?": "204",
        "What is the access code for Mina ?": "259",
        "What is the access code for Umar ?": "382",
    }


def test_streaming_example_answers_and_checks_the_streamed_usage(served, capsys, monkeypatch):
    server, _ = served
    monkeypatch.syspath_prepend(str(EXAMPLE.parent))
    path = EXAMPLE.parent / "llama_index_stream.py"
    spec = importlib.util.spec_from_file_location("llama_index_stream", path)
    module = importlib.util.module_from_spec(spec)
    monkeypatch.setitem(sys.modules, "llama_index_stream", module)
    spec.loader.exec_module(module)
    assert module.main(["--base-url", server.base_url, "--profile", str(PROFILE)]) == 0
    out = capsys.readouterr().out
    assert "->  '204'  (expected 204: OK)" in out
    planned, counted = out.split("usage check: planned ")[1].split(" tokens, server counted ")
    assert int(planned) == int(counted.split()[0])
