"""Reordering alone: the order phaseaware's planner gives retrieved records, no prompt.

The framework drop-ins for ``LongContextReorder`` (LangChain's document transformer,
LlamaIndex's node postprocessor) see only the retrieved items, not the prompt, and
may return only those items: no padding, no restated evidence. So the order is the
planner's own (:func:`phaseaware.assembly.plan.planner.order_chunks`, strategy
``"reorder"``) over the kit's relevance rule (:func:`.records.relevance_scores`):

- **no profile**: lost in the middle: the most relevant records at both ends, the
  least relevant in the middle, and the most relevant one last, nearest the question
  that follows the context. (``LongContextReorder`` puts it first or last depending on
  whether the count is odd or even; otherwise the arrangement is the same.)
- **duplicates** (records under one framework id, as hybrid retrievers return them)
  are merged by the kit's rule (:mod:`.records`): the best-scored copy stays, the
  others leave the list, as ``LostInTheMiddleRanker`` deduplicates.
- **a profile**: ascending relevance, the most relevant last: a calibrated profile
  measures the raw local window before the question as the most reliable place, and
  its residue effects need padding, which a reorder cannot add (use the compressor or
  postprocessor for that: they pad and report measured positions).
"""

from __future__ import annotations

import os
from collections.abc import Sequence

from phaseaware.assembly.plan.planner import order_chunks
from phaseaware.errors import InputError
from phaseaware.integrate.records import SourceRecord, record_chunks, record_index
from phaseaware.profiles.model import Profile
from phaseaware.profiles.registry import get_profile

__all__ = ["reorder_profile", "reorder_records"]


def reorder_profile(profile: str | os.PathLike[str] | Profile | None) -> Profile | None:
    """A drop-in's ``profile`` argument resolved once (a model name or profile file
    through :func:`phaseaware.get_profile`); ``None`` stays ``None``."""
    if profile is None or isinstance(profile, Profile):
        return profile
    if isinstance(profile, str | os.PathLike):
        return get_profile(profile)
    raise InputError(
        f"profile must be a model name, a profile file path or a Profile, "
        f"got {type(profile).__name__}"
    )


def reorder_records(
    records: Sequence[SourceRecord], *, profile: Profile | None, what: str = "documents"
) -> tuple[int, ...]:
    """The input indices of ``records`` in context order, first to last (see the module
    docstring); every distinct record appears once (a duplicate's best-scored copy),
    none is dropped. ``InputError`` names a bad record (``what[i]``)."""
    chunks = record_chunks(records, what=what)
    order = order_chunks(
        admitted=range(len(chunks)),
        scores=[c.score for c in chunks],
        strategy="reorder",
        has_profile=profile is not None,
    )
    return tuple(record_index(chunks[i].id or "") for i in order)
