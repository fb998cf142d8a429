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

A drop-in accepts what ``LongContextReorder`` accepts: a metadata score that is no
finite number (``"0.9"``, NaN, inf, a bool) orders like a missing one, with one
:class:`UnusableScoreWarning` per call naming the first such record and the count
(the compressor and postprocessor, which place evidence by score, still refuse it).
"""

from __future__ import annotations

import math
import os
import warnings
from collections.abc import Sequence
from dataclasses import replace

from phaseaware.assembly.plan.planner import order_chunks
from phaseaware.errors import InputError, PhaseawareWarning
from phaseaware.integrate.records import SourceRecord, record_chunks, record_index
from phaseaware.profiles.model import Profile
from phaseaware.profiles.registry import get_profile

__all__ = ["UnusableScoreWarning", "reorder_profile", "reorder_records"]


class UnusableScoreWarning(PhaseawareWarning):
    """A reorder drop-in got scores that are no finite number: ordered as missing ones."""


def _usable(score: object) -> bool:
    if score is None:
        return True
    if isinstance(score, bool) or not isinstance(score, int | float):
        return False
    try:
        return math.isfinite(float(score))
    except OverflowError:
        return False


def _scores_usable(records: Sequence[SourceRecord], what: str) -> list[SourceRecord]:
    """``records`` with every unusable score made missing (new records; one warning)."""
    bad = [i for i, r in enumerate(records) if not _usable(r.score)]
    if not bad:
        return list(records)
    first = records[bad[0]].score
    warnings.warn(
        f"{what}[{bad[0]}] has score {repr(first)[:60]}, which is no finite number ({len(bad)} "
        f"of {len(records)} such): ordered as unscored, after every scored one, as "
        "LongContextReorder would keep them; fix the retriever's score",
        UnusableScoreWarning,
        stacklevel=3,
    )
    broken = set(bad)
    return [replace(r, score=None) if i in broken else r for i, r in enumerate(records)]


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
    none is dropped. A score that is no finite number orders like a missing one (one
    warning); ``InputError`` names a record that cannot be placed at all (``what[i]``)."""
    chunks = record_chunks(_scores_usable(records, what), what=what)
    order = order_chunks(
        admitted=range(len(chunks)),
        scores=[c.score for c in chunks],
        strategy="reorder",
        has_profile=profile is not None,
    )
    return tuple(record_index(chunks[i].id or "") for i in order)
