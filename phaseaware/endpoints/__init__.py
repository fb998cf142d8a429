"""Endpoints: how a serving stack's token positions relate to phaseaware's rendering."""

from __future__ import annotations

from phaseaware.endpoints.usage import ON_MISMATCH, UsageCheck, check_prompt_tokens

__all__ = ["ON_MISMATCH", "UsageCheck", "check_prompt_tokens"]
