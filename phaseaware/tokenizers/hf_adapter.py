"""Moved to :mod:`phaseaware.tokenizers.hf`; this shim keeps the old import path."""

from phaseaware.tokenizers.hf import HFTokenizer, byte_level_alphabet, load_hf_tokenizer

__all__ = ["HFTokenizer", "byte_level_alphabet", "load_hf_tokenizer"]
