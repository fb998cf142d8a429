"""Fixtures of the LlamaIndex integration's tests: offline, single-threaded, isolated state.

The reference model's profile in ``data/phaseaware-reference.json`` was written by
``phaseaware calibrate --base-prompts 30 --threads 1 --out data/phaseaware-reference.json``
(the shipped reference model, key and window sweeps, 480 probes, ~24 s).
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")

REFERENCE_PROFILE = Path(__file__).parent / "data" / "phaseaware-reference.json"


@pytest.fixture(autouse=True)
def _isolated_user_state(tmp_path_factory: pytest.TempPathFactory, monkeypatch: pytest.MonkeyPatch):
    home = tmp_path_factory.mktemp("phaseaware-home")
    monkeypatch.setenv("PHASEAWARE_HOME", str(home))
    monkeypatch.delenv("PHASEAWARE_PROFILE_PATH", raising=False)
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    yield home


@pytest.fixture(scope="session")
def reference_profile_path() -> Path:
    return REFERENCE_PROFILE
