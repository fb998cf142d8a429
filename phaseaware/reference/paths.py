"""Where the shipped reference model lives (package data; never downloaded)."""

from __future__ import annotations

from pathlib import Path

MODEL_NAME = "phaseaware-reference"


def model_dir() -> Path:
    """Folder holding config.json, model.safetensors and the tokenizer files."""
    return Path(__file__).parent / "data"
