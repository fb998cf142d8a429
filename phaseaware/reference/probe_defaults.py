"""The probe defaults of the shipped reference model, shared by ``calibrate`` and ``demo``.

The demo's RAG prompts hold five facts (the asked one among four distractors)
in about 280 tokens (220-380); calibration probes the same: 300-token prompts,
four distractor records, the asked record anywhere from the context's start to
nine tenths of it, plus the window sweep for the raw local window.
"""

from __future__ import annotations

__all__ = ["CONTEXT_TOKENS", "DISTRACTORS", "DEPTH", "SWEEPS"]

CONTEXT_TOKENS = 300
DISTRACTORS = 4
DEPTH = (0.0, 0.9)
SWEEPS = ("key", "window")
