"""A profile for the simulated models of the ``compare`` tests, measured-looking, over cl100k.

``simulated_profile(accuracy, ...)``: period ``len(accuracy)``, ``n`` rows a residue (50 each
unless given), a Wilson-like interval of +-0.1 around each accuracy (clipped to 0..1), the
cl100k tokenizer with its fingerprint (``fingerprint=False``: none, as a published profile),
and a ``measured`` provenance whose ``protocol`` names the chat format when a test needs one.
Further :class:`~phaseaware.profiles.model.Profile` fields (``reliability``, ``extra``) pass
through.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from phaseaware.profiles.model import Profile, Provenance, TokenizerRef
from phaseaware.tokenizers import load_tokenizer

__all__ = ["TOKENIZER", "simulated_profile"]

TOKENIZER = "tiktoken:cl100k_base"


def simulated_profile(
    accuracy: Sequence[float],
    *,
    model: str = "m",
    protocol: str = "sim",
    n: Sequence[int] | None = None,
    fingerprint: bool = True,
    **fields: Any,
) -> Profile:
    """The profile ``accuracy`` describes (see the module docstring)."""
    tok = load_tokenizer(TOKENIZER)
    return Profile(
        model=model,
        period=len(accuracy),
        residue_accuracy=tuple(accuracy),
        n=tuple(n) if n is not None else (50,) * len(accuracy),
        ci_low=tuple(max(0.0, a - 0.1) for a in accuracy),
        ci_high=tuple(min(1.0, a + 0.1) for a in accuracy),
        tokenizer=TokenizerRef(
            spec=tok.spec, fingerprint=tok.fingerprint() if fingerprint else None
        ),
        local_window=None,
        provenance=Provenance(
            kind="measured",
            source="test",
            protocol=protocol,
            created="2026-12-04",
            tool_version="0",
        ),
        **fields,
    )
