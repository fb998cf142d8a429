"""Fixtures of the Haystack integration's tests: offline, single-threaded, isolated state."""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path

import pytest

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
os.environ.setdefault("HAYSTACK_TELEMETRY_ENABLED", "False")  # no posthog calls, ever


@pytest.fixture(autouse=True)
def _isolated_user_state(
    tmp_path_factory: pytest.TempPathFactory, monkeypatch: pytest.MonkeyPatch
) -> Iterator[Path]:
    home = tmp_path_factory.mktemp("phaseaware-home")
    monkeypatch.setenv("PHASEAWARE_HOME", str(home))
    monkeypatch.delenv("PHASEAWARE_PROFILE_PATH", raising=False)
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    yield home
