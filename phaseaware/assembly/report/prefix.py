"""The cache-aware figures of a result: how many leading tokens a prefix cache can reuse.

A server's prefix cache (vLLM's automatic prefix caching, DeepSeek's hosted
context cache) reuses the KV entries of the longest run of leading token ids a
new request shares with one it has seen. ``AssemblyResult`` reports that run
twice (:func:`cache_figures`, once, in the report stage):

- ``unchanged_prefix_tokens``, against the prompt rendered with an empty context:
  the layout's ``prefix + suffix`` (the system prompt and history before the
  context slot, what stays cached whatever is retrieved), which the layout
  already holds: nothing is rendered again;
- ``unchanged_sent_tokens``, where the layout holds a conversation already sent
  (``assemble_append``), against the sent text: what the server holds from the
  previous request.

A server caching whole blocks of ``B`` tokens reuses at most ``B * (n // B)`` of
``n`` such tokens. The count itself (token ids, never characters: BPE merges
across the point where two texts part) is
:func:`~phaseaware.assembly.retokenize.prefix.shared_tokens`: the prompt's verified
token starts give the tokens before the last proven cut, and only the few
characters around the parting point are encoded. :func:`unchanged_prefix_tokens`
is the same count for any two texts.
"""

from __future__ import annotations

import numpy as np

from phaseaware.assembly.prepare.measured_request import Setup
from phaseaware.assembly.retokenize.prefix import (
    common_prefix_chars,
    common_prefix_ids,
    shared_tokens,
)
from phaseaware.chat.append import AppendLayout, TailLayout
from phaseaware.tokenizers.base import Tokenizer

__all__ = [
    "cache_figures",
    "common_prefix_chars",
    "common_prefix_ids",
    "unchanged_prefix_tokens",
]


def unchanged_prefix_tokens(
    tokenizer: Tokenizer, text: str, other: str, *, starts: np.ndarray | None = None
) -> int:
    """Longest common prefix of ``tokenizer.encode(text)`` and ``tokenizer.encode(other)``.

    ``starts``: the char start of each token of ``text``, if known (saves encoding
    the shared head). Exact for every tokenizer (``retokenize.prefix.shared_tokens``).
    """
    return shared_tokens(tokenizer, text, (other,), starts=starts)[0]


def cache_figures(setup: Setup, text: str, *, starts: np.ndarray | None) -> tuple[int, int | None]:
    """(``unchanged_prefix_tokens``, ``unchanged_sent_tokens``) of the prompt ``text``.

    The first against the prompt without context, ``frame.prefix + frame.suffix``
    (the layout invariant: ``render(context="").text == prefix + suffix``); the second
    against the layout's sent text, where it has one (an append layout, or its tail
    from the cut on: the caller adds the tokens before the cut), else ``None``.
    """
    layout, frame = setup.layout, setup.frame
    sent: str | None = None
    if isinstance(layout, TailLayout):
        sent = layout.inner.sent_text[layout.start :]
    elif isinstance(layout, AppendLayout):
        sent = layout.sent_text
    others = (frame.prefix + frame.suffix,) if sent is None else (frame.prefix + frame.suffix, sent)
    counts = shared_tokens(setup.tokenizer, text, others, starts=starts)
    return counts[0], (counts[1] if sent is not None else None)
