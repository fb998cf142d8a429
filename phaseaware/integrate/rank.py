"""A ranker's selection: how many records, and which, before the reorder.

Haystack's ``LostInTheMiddleRanker`` takes ``top_k`` and ``word_count_threshold`` besides
the documents; its phaseaware drop-in takes ``top_k`` and a token budget. The rule, one
for every adapter that offers it:

1. duplicates merged (:func:`~phaseaware.integrate.merge_records`: the best-scored copy
   of each id);
2. relevance as the kit defines it (:func:`~phaseaware.integrate.relevance_scores`:
   scores, else retrieval order), most relevant first, ties in retrieval order;
3. ``top_k``: the ``top_k`` most relevant;
4. ``token_budget``: the most relevant whose texts together hold at most this many
   tokens (each text counted alone, as the tokenizer encodes it); the first that would
   cross the budget is left out, and every less relevant one with it. Unlike
   ``word_count_threshold``, the budget is never crossed;
5. the survivors in :func:`~phaseaware.integrate.reorder_records`' order (lost in the
   middle without a profile, ascending relevance with one).
"""

from __future__ import annotations

from collections.abc import Sequence

from phaseaware.assembly.plan.planner import order_chunks
from phaseaware.errors import InputError
from phaseaware.integrate.records import SourceRecord, record_chunks, record_index
from phaseaware.profiles.model import Profile
from phaseaware.tokenizers.base import Tokenizer

__all__ = ["check_limit", "rank_records"]


def check_limit(value: object, *, name: str) -> int | None:
    """``value`` if it is ``None`` or an int > 0, else ``InputError`` naming ``name``."""
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, int) or value <= 0:
        raise InputError(f"{name} must be an integer > 0 (or None: no limit), got {value!r}")
    return value


def rank_records(
    records: Sequence[SourceRecord],
    *,
    profile: Profile | None,
    top_k: int | None = None,
    token_budget: int | None = None,
    tokenizer: Tokenizer | None = None,
    what: str = "documents",
) -> tuple[int, ...]:
    """The input indices of the records kept, in context order (rule: module docstring).
    ``token_budget`` needs ``tokenizer``; ``InputError`` names a bad record or limit."""
    top_k = check_limit(top_k, name="top_k")
    token_budget = check_limit(token_budget, name="token_budget")
    if token_budget is not None and tokenizer is None:
        raise InputError("token_budget counts tokens: pass the tokenizer as well")
    chunks = record_chunks(records, what=what)
    ranked = sorted(range(len(chunks)), key=lambda i: -chunks[i].score)  # stable: ties in order
    if top_k is not None:
        ranked = ranked[:top_k]
    if token_budget is not None and tokenizer is not None:
        total, fitting = 0, []
        for i in ranked:
            total += len(tokenizer.encode(chunks[i].text))
            if total > token_budget:
                break
            fitting.append(i)
        ranked = fitting
    kept = sorted(ranked)  # retrieval order again: the reorder's ties read it
    order = order_chunks(
        admitted=range(len(kept)),
        scores=[chunks[i].score for i in kept],
        strategy="reorder",
        has_profile=profile is not None,
    )
    return tuple(record_index(chunks[kept[j]].id or "") for j in order)
