"""phaseaware: phase-aware, token-exact context assembly for chunk-compressed LLMs."""

from __future__ import annotations

__version__ = "0.1.0"
