"""Where the shipped reference model lives (package data; never downloaded)."""

from __future__ import annotations

from pathlib import Path

from phaseaware.tokenizers.registry import REFERENCE_MODEL_DIR

MODEL_NAME = "phaseaware-reference"


def model_dir() -> Path:
    """Folder holding config.json, model.safetensors and the tokenizer files."""
    return REFERENCE_MODEL_DIR
