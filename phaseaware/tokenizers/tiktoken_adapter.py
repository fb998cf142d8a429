"""Moved to :mod:`phaseaware.tokenizers.tiktoken`; this shim keeps the old import path."""

from phaseaware.tokenizers.tiktoken import TiktokenTokenizer

__all__ = ["TiktokenTokenizer"]
