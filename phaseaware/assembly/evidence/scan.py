"""Every occurrence of a question's terms in a retrieved set, in one pass per term form.

The set is joined once (``SEPARATOR`` before, between and after the texts; a blank text
joins as empty) and lower-cased once. Each form is then found in the joined text:

- by its ``TermSearch.patterns`` expression once the question has them (its second
  search): the literal searched as a prefix, about ``str.find``'s speed, with the
  word-boundary rule as lookarounds, so Python touches an occurrence only to read its
  start;
- before that, with ``str.split``: positions are the running sum of the piece lengths
  and the characters around the occurrences are checked in one ``\\w`` search;
- a form that is not split-safe (an occurrence that may be valid can start inside
  another, or it holds the separator) takes a ``str.find`` loop that checks each
  occurrence as ``evidence.terms`` states the rule.

The number rule is applied per occurrence of a numeric form.

The separator is a non-word character, not ``.``/``,``, not a digit, not space, neither
cased nor case-ignorable: at a text's edges every check reads it as the definition reads
the text's end (and ``str.lower`` of the joined text equals the texts lowered one by
one). An occurrence never spans two texts: a form holding the separator is found by the
``str.find`` loop, which keeps only occurrences inside one text.
"""

from __future__ import annotations

import re
from bisect import bisect_left, bisect_right
from collections.abc import Sequence
from dataclasses import dataclass
from functools import partial
from itertools import accumulate
from operator import itemgetter

from phaseaware.assembly.evidence.terms import (
    SEPARATOR,
    TermSearch,
    is_word_char,
    lower_same_length,
    touches_number,
)

__all__ = ["SetScan", "scan_set"]

_WORD = re.compile(r"\w")  # is_word_char (checked on every code point by the tests)
_FIRST = itemgetter(0)
_LAST = itemgetter(-1)


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
    patterns = search.patterns or (None,) * len(search.forms)
    for (form, _, numeric), safe, pattern in zip(
        search.forms, search.split_safe, patterns, strict=True
    ):
        got: list[int] | None
        if pattern is not None:  # the pattern checks word boundaries; the number rule here
            got = [m.start() for m in pattern.finditer(low)]
        else:
            got = _split_positions(low, form) if safe else None
        if got is None:
            found.append(_find_positions(low, form, numeric, starts, lengths))
            continue
        if numeric and got:
            got = [a for a in got if not touches_number(low, a, a + len(form))]
        found.append(got)
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


def _split_positions(low: str, form: str) -> list[int] | None:
    """Occurrences of ``form`` (split-safe) where no word character touches it, or None
    where two occurrences touch (then the pieces do not show the characters around
    each). Positions are the running sum of the piece lengths; the characters around
    occurrence ``k`` are the last of piece ``k`` and the first of piece ``k + 1``, checked
    in one ``\\w`` search each."""
    pieces = low.split(form)
    if len(pieces) == 1:
        return []
    if "" in pieces:  # the joined text starts and ends with the separator: adjacent ones
        return None
    size = len(form)
    at = list(accumulate(map(size.__add__, map(len, pieces[:-1])), initial=-size))
    del at[0]
    bad = {m.start() for m in _WORD.finditer("".join(map(_LAST, pieces[:-1])))}
    bad.update(m.start() for m in _WORD.finditer("".join(map(_FIRST, pieces[1:]))))
    return [a for k, a in enumerate(at) if k not in bad] if bad else at


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
