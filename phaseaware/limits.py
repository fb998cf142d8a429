"""Upper bounds of user-given integers, in one place, checked before any arithmetic.

A request's ``"position_offset": 10**29`` must be a typed error, not an
``OverflowError`` deep in numpy; a flag's ``--period 1e20`` must not plan a
22-digit probe count. Generous on purpose: no served model comes near them.
Dependency-free so the CLI's argument parsers can import it at no cost.
"""

from __future__ import annotations

__all__ = [
    "MAX_BUDGET_TOKENS",
    "MAX_CHUNKS",
    "MAX_KEYS_PER_CHUNK",
    "MAX_PAD_COST",
    "MAX_PERIOD",
    "MAX_POSITION_OFFSET",
    "MAX_REPAIR_ROUNDS",
    "MAX_REPEAT_CHARS",
    "MAX_TOKENS",
]

MAX_POSITION_OFFSET = 1_000_000  # tokens a server adds before the prompt (1 for a BOS)
# The largest profile period assembly accepts. Qualifying the filler for period P
# tokenizes pads of up to 2P units (O(P^2) characters, once per tokenizer and period;
# about 1 s at P = 500, see assembly/prepare/measured_request.py); periods seen in practice are 4-128.
MAX_PERIOD = 512
MAX_BUDGET_TOKENS = 100_000_000  # a prompt budget in tokens
MAX_TOKENS = 100_000_000  # a context length or window in tokens (profiles, flags)
MAX_KEYS_PER_CHUNK = 10_000
# Chunks in one assembly: a prompt holds a few hundred; every chunk is measured (tokenized),
# so a million tiny ones cost a minute and gigabytes before any answer.
MAX_CHUNKS = 100_000
MAX_REPEAT_CHARS = 1_000_000
MAX_REPAIR_ROUNDS = 100
MAX_PAD_COST = 1e6  # objective cost per padding token (relevance·reliability units)
