"""Packaging: the namespace package resolves beside llama-index-core's and exports its API."""

from __future__ import annotations

from pathlib import Path

PACKAGE = Path(__file__).resolve().parents[2]


def test_all_is_the_public_api() -> None:
    import llama_index.llms.phaseaware as pkg

    assert sorted(pkg.__all__) == [
        "AGENT_REPORT_KEY", "NodeRegistry", "PhaseAwareAgentLLM", "retriever_tool",
    ]  # fmt: skip
    assert all(getattr(pkg, name) is not None for name in pkg.__all__)


def test_namespace_package_has_no_init_above_it() -> None:
    assert not (PACKAGE / "llama_index" / "__init__.py").exists()
    assert not (PACKAGE / "llama_index" / "llms" / "__init__.py").exists()
    import llama_index.llms.openai_like  # the namespace is shared with installed LLM packages
    import llama_index.llms.phaseaware as pkg

    assert Path(pkg.__file__).resolve().is_relative_to(PACKAGE)
    assert llama_index.llms.openai_like is not None
