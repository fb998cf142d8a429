"""Every occurrence of a question's terms in a retrieved set, in one pass per term form.

The set is joined once (``SEPARATOR`` before, between and after the texts; a blank text
joins as empty) and lower-cased once. Each form is then found in the joined text by its
``TermSearch.patterns`` expression (the literal searched as a prefix, about
``str.find``'s speed, with the word-boundary rule as lookarounds), so Python touches an
occurrence only to read its start (and, for a number, to apply the number rule). A form
without a pattern (one whose valid occurrences may overlap one another, or that holds the
separator) takes a ``str.find`` loop that checks each occurrence as ``evidence.terms``
states the rule.

The separator is a non-word character, not ``.``/``,``, not a digit, not space, neither
cased nor case-ignorable: at a text's edges every check reads it as the definition reads
the text's end (and ``str.lower`` of the joined text equals the texts lowered one by
one). An occurrence never spans two texts: a form holding the separator is found by the
``str.find`` loop, which keeps only occurrences inside one text.
"""

from __future__ import annotations

from bisect import bisect_left, bisect_right
from collections.abc import Sequence
from dataclasses import dataclass
from functools import partial
from itertools import accumulate

from phaseaware.assembly.evidence.terms import (
    SEPARATOR,
    TermSearch,
    is_word_char,
    lower_same_length,
    touches_number,
)

__all__ = ["SetScan", "scan_set"]


@dataclass(frozen=True)
class SetScan:
    """The occurrences of a search's terms in one retrieved set.

    ``text``: the texts joined (``SEPARATOR`` before, between and after; blank texts
    empty), not lower-cased; ``starts[c]``: where text ``c`` begins in it.
    ``positions[t]``: the starts (in ``text``) of term ``t``'s occurrences, sorted,
    overlaps resolved; text ``c`` holds ``positions[t][cuts[t][c]:cuts[t][c + 1]]``.
    """

    text: str
    starts: tuple[int, ...]
    positions: tuple[list[int], ...]
    cuts: tuple[list[int], ...]


def scan_set(texts: Sequence[str], *, blank: Sequence[bool], search: TermSearch) -> SetScan:
    """Every valid occurrence of ``search``'s terms in ``texts`` (``blank`` ones: none)."""
    kept = ["" if b else t for t, b in zip(texts, blank, strict=True)]
    lengths = [len(t) for t in kept]
    starts = list(accumulate([n + 1 for n in lengths], initial=1))[:-1]
    text = SEPARATOR + SEPARATOR.join(kept) + SEPARATOR
    low = text.lower()
    if len(low) != len(text):  # some character lowers to several: keep its case
        low = SEPARATOR + SEPARATOR.join(map(lower_same_length, kept)) + SEPARATOR
    found: list[list[int]] = []
    for (form, _, numeric), pattern in zip(search.forms, search.patterns, strict=True):
        if pattern is None:
            found.append(_find_positions(low, form, numeric, starts, lengths))
            continue
        starts_of = [m.start() for m in pattern.finditer(low)]
        if numeric and starts_of:  # the pattern checks word boundaries; the number rule here
            starts_of = [a for a in starts_of if not touches_number(low, a, a + len(form))]
        found.append(starts_of)
    positions: list[list[int]] = [[] for _ in search.terms]
    if search.overlaps:
        ranked = sorted(
            (at, -len(form), term)
            for (form, term, _), got in zip(search.forms, found, strict=True)
            for at in got
        )
        reached = -1
        for at, neg_size, term in ranked:  # leftmost, then longest, then earliest term
            if at >= reached:
                positions[term].append(at)
                reached = at - neg_size
    else:
        for (_, term, _), got in zip(search.forms, found, strict=True):
            positions[term] = sorted(positions[term] + got) if positions[term] else got
    bounds = [*starts, len(low)]
    cuts = tuple(list(map(partial(bisect_left, p), bounds)) for p in positions)
    return SetScan(text=text, starts=tuple(starts), positions=tuple(positions), cuts=cuts)


def _find_positions(
    low: str, form: str, numeric: bool, starts: Sequence[int], lengths: Sequence[int]
) -> list[int]:
    """Valid occurrences of ``form`` inside one text each, overlapping ones included."""
    out: list[int] = []
    size = len(form)
    at = low.find(form)
    while at >= 0:
        end = at + size
        text = bisect_right(starts, at) - 1
        if (
            text >= 0
            and end <= starts[text] + lengths[text]
            and not (
                is_word_char(low[at - 1])
                or is_word_char(low[end])
                or (numeric and touches_number(low, at, end))
            )
        ):
            out.append(at)
        at = low.find(form, at + 1)
    return out
