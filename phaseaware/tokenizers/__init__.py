"""Tokenizer adapters: one spec string -> an object with exact ids and char offsets."""

from __future__ import annotations

from phaseaware.tokenizers.base import (
    BatchTokenizer,
    CharIndexTokenizer,
    ChatTemplateTokenizer,
    ParallelBatchTokenizer,
    TokenizedText,
    Tokenizer,
)
from phaseaware.tokenizers.registry import load_tokenizer, register_tokenizer

__all__ = [
    "BatchTokenizer",
    "CharIndexTokenizer",
    "ChatTemplateTokenizer",
    "ParallelBatchTokenizer",
    "TokenizedText",
    "Tokenizer",
    "load_tokenizer",
    "register_tokenizer",
]
