"""Moved to :mod:`phaseaware.tokenizers.tiktoken`; this shim keeps the old import path."""

from phaseaware.tokenizers.tiktoken import ENCODINGS, EncodingDefinition, load_encoding

__all__ = ["ENCODINGS", "EncodingDefinition", "load_encoding"]
