"""How many leading tokens of a prompt a prefix cache can reuse: token-exact, from ids.

A server's prefix cache (vLLM's automatic prefix caching, DeepSeek's hosted
context cache) reuses the KV entries of the longest run of leading token ids a
new request shares with one it has seen. :func:`unchanged_prefix_tokens` counts
that run between two texts: the length of the longest common prefix of their
token ids (never of their characters: BPE merges across the point where the
texts part, so the last shared characters may sit in a token that differs).

``AssemblyResult`` reports it twice: ``unchanged_prefix_tokens``, against the
prompt rendered with an empty context (the system prompt and history before
the context slot: what stays cached whatever is retrieved), and, for
``assemble_append``, ``unchanged_sent_tokens``, against the sent conversation
(what the server holds from the previous request). A server caching whole
blocks of ``B`` tokens reuses at most ``B * (n // B)`` of ``n`` such tokens.

Cost: where the tokenizer has a proven cut rule
(:func:`~phaseaware.assembly.retokenize.prefix.prefix_cut`), only the text
around the point where the two texts part is encoded; the tokens before the
cut are counted from the prompt's verified token starts. Otherwise both texts
are encoded in full.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from phaseaware.assembly.prepare.measured_request import Setup
from phaseaware.assembly.retokenize.prefix import prefix_cut
from phaseaware.tokenizers.base import Tokenizer

__all__ = [
    "common_prefix_chars",
    "common_prefix_ids",
    "unchanged_prefix_tokens",
    "without_context_tokens",
]

_WINDOWS = (256, 4096, 65536)  # chars past the parting point searched for a cut


def common_prefix_ids(a: Sequence[int], b: Sequence[int]) -> int:
    """Length of the longest common prefix of two id sequences (vectorised)."""
    n = min(len(a), len(b))
    if n == 0:
        return 0
    diff = np.flatnonzero(np.asarray(a[:n], dtype=np.int64) != np.asarray(b[:n], dtype=np.int64))
    return int(diff[0]) if diff.size else n


def common_prefix_chars(a: str, b: str) -> int:
    """Length of the longest common prefix of two strings (C-level compares, O(n log n))."""
    lo, hi = 0, min(len(a), len(b))
    if a[:hi] == b[:hi]:
        return hi
    while lo < hi:  # a[:lo] == b[:lo] and a[:hi] != b[:hi]
        mid = (lo + hi + 1) // 2
        if a[:mid] == b[:mid]:
            lo = mid
        else:
            hi = mid - 1
    return lo


def unchanged_prefix_tokens(
    tokenizer: Tokenizer, text: str, other: str, *, starts: np.ndarray | None = None
) -> int:
    """Longest common prefix of ``tokenizer.encode(text)`` and ``tokenizer.encode(other)``.

    ``starts``: the char start of each token of ``text`` (its verified
    tokenization), if known: saves encoding the shared head. Exact for every tokenizer: with a proven cut ``p`` in the
    shared text, both encodings are the tokens of ``text[:p]`` followed by those
    of the rest, so only the rest is compared; without one, both texts are
    encoded in full.
    """
    shared = common_prefix_chars(text, other)
    if shared == len(text) == len(other):
        return len(starts) if starts is not None else len(tokenizer.encode(text))
    p, _ = prefix_cut(tokenizer, text[:shared]) if shared > 1 else (None, "")
    if p is None:
        return common_prefix_ids(tokenizer.encode(text), tokenizer.encode(other))
    if starts is not None:  # p is a cut of text: a token starts there
        head = int(np.searchsorted(starts, p, side="left"))
    else:
        head = len(tokenizer.encode(text[:p]))
    # Both texts start with text[:p]; ids can agree only on tokens that end at or
    # before ``shared`` (a token crossing it would hold differing characters), so
    # the text's tokens from p up to a cut past ``shared`` hold every candidate.
    mine = _ids_through(tokenizer, text, start=p, shared=shared)
    theirs = tokenizer.encode(other[p:])  # the other text's tail: encoded whole
    return head + common_prefix_ids(mine, theirs)


def _ids_through(tokenizer: Tokenizer, text: str, *, start: int, shared: int) -> list[int]:
    """Ids of ``text`` from char ``start`` (a cut) through the token holding ``shared``."""
    if shared >= len(text):
        return tokenizer.encode(text[start:])
    for window in _WINDOWS:
        end = shared + window
        if end >= len(text):
            break
        q, _ = prefix_cut(tokenizer, text[:end])
        if q is not None and q > shared:
            return tokenizer.encode(text[start:q])
    return tokenizer.encode(text[start:])


def without_context_tokens(setup: Setup, text: str, *, starts: np.ndarray | None) -> int:
    """``unchanged_prefix_tokens`` of the prompt ``text`` against ``setup``'s layout
    rendered with an empty context (same system prompt, history and question)."""
    empty = setup.layout.render(system=setup.system, context="", question=setup.question)
    return unchanged_prefix_tokens(setup.tokenizer, text, empty.text, starts=starts)
