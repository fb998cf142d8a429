"""Shared fixtures of langchain-phaseaware's tests: offline, isolated user state."""

from __future__ import annotations

import os

import pytest

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")


@pytest.fixture(autouse=True)
def _isolated_user_state(tmp_path_factory: pytest.TempPathFactory, monkeypatch: pytest.MonkeyPatch):
    """Point phaseaware's user folder at a fresh temp dir for every test."""
    monkeypatch.setenv("PHASEAWARE_HOME", str(tmp_path_factory.mktemp("phaseaware-home")))
    monkeypatch.delenv("PHASEAWARE_PROFILE_PATH", raising=False)
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    yield
