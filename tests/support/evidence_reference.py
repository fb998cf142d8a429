"""The default-evidence search as it was before the single-pass rewrite (commit f6f8098,
``phaseaware/assembly/evidence/search.py``), kept verbatim as the oracle of
``tests/unit/assembly/test_evidence_fast.py``: the package's ``set_key_chars`` must return
exactly what this per-chunk ``str.find`` search returns, on every input.

See the package module's docstring for the definition (weights, best sentence, keys by
weight, matching on word boundaries, numbers with thousands separators)."""

from __future__ import annotations

import math
import re
from bisect import bisect_right
from collections.abc import Sequence
from dataclasses import dataclass

__all__ = ["reference_set_key_chars", "reference_sentence_ends"]

#: Other keys of a chunk are occurrences of terms at least this fraction as distinctive
#: as its primary key's term.
KEY_WEIGHT_RATIO = 0.5

#: Where a sentence ends: ``.!?`` (or their CJK forms) before whitespace, or a newline.
SENTENCE_END = re.compile(r"[.!?。！？](?=\s)|\n")
#: The characters that end a sentence before whitespace.
SENTENCE_MARKS = ".!?。！？"
_GROUPED = re.compile(r"\d{1,3}(?:,\d{3})+(?:\.\d+)?")  # 1,000 or 12,345.6
_GROUP_SEPARATORS = ("", ",", "\u00a0", "\u202f", "_")  # thousands separators of a number


def _is_word(ch: str) -> bool:
    """``\\w`` of Python's ``re`` for one character (alphanumeric or underscore)."""
    return ch.isalnum() or ch == "_"


def _forms(term: str) -> tuple[tuple[str, bool], ...]:
    """(lower-cased text, numeric) of each form of one term that the text may carry.

    A whole number (``1000``, ``1,000``) is found with any one thousands separator
    used throughout (``1000``, ``1,000``, ``1 000`` with a no-break space, ...).
    """
    if _GROUPED.fullmatch(term):
        term = term.replace(",", "")
    whole, dot, fraction = term.partition(".")
    if whole.isdigit() and (not dot or fraction.isdigit()):
        tail = dot + fraction
        if len(whole) <= 3:
            return ((term, True),)
        head = len(whole) % 3 or 3
        groups = [whole[:head]] + [whole[k : k + 3] for k in range(head, len(whole), 3)]
        return tuple((sep.join(groups) + tail, True) for sep in _GROUP_SEPARATORS)
    return ((term.lower(), term[:1].isdigit() or term[-1:].isdigit()),)


def lower_same_length(text: str) -> str:
    """``text.lower()``, except characters that lower to several keep their case (offsets stay)."""
    low = text.lower()
    if len(low) == len(text):
        return low
    return "".join(c.lower() if len(c.lower()) == 1 else c for c in text)


@dataclass(frozen=True)
class TermSearch:
    """The question's terms and every text form of each: ``(form, term index, numeric)``.

    Occurrences are found with ``str.find`` on the lower-cased text (C speed,
    no per-character Python), then checked for word boundaries: Python's
    ``\\w`` on either side ends a match; a numeric form also may not touch
    ``digit.``/``digit,`` before or ``.digit``/``,digit`` after it.
    """

    terms: tuple[str, ...]
    forms: tuple[tuple[str, int, bool], ...]

    def occurrences(self, text: str) -> list[tuple[int, int]]:
        """``(char offset, term index)`` of every occurrence in ``text``, in text order.

        Where occurrences overlap, the leftmost wins, then the longer one (as a
        regex alternation tried longest first, scanning left to right).
        """
        low = lower_same_length(text)
        found: list[tuple[int, int, int]] = []
        n = len(text)
        for form, term, numeric in self.forms:
            size = len(form)
            at = low.find(form)
            while at >= 0:
                end = at + size
                if not (
                    (at and _is_word(low[at - 1]))
                    or (end < n and _is_word(low[end]))
                    or (numeric and _touches_number(low, at, end))
                ):
                    found.append((at, -size, term))
                at = low.find(form, at + 1)
        if not found:
            return []
        found.sort()
        out: list[tuple[int, int]] = []
        reached = -1
        for at, neg_size, term in found:
            if at >= reached:
                out.append((at, term))
                reached = at - neg_size
        return out

    @property
    def nested(self) -> bool:
        """Whether some form occurs inside another (then overlaps must be resolved)."""
        forms = [f for f, _, _ in self.forms]
        return any(a != b and a in b for a in forms for b in forms)


def _touches_number(text: str, at: int, end: int) -> bool:
    before = at >= 2 and text[at - 1] in ".," and text[at - 2].isdigit()
    after = end + 1 < len(text) and text[end] in ".," and text[end + 1].isdigit()
    return before or after


def reference_sentence_ends(text: str) -> list[int]:
    """``[m.end() for m in SENTENCE_END.finditer(text)]``, found with ``str.find``."""
    ends: list[int] = []
    n = len(text)
    for mark in SENTENCE_MARKS:
        at = text.find(mark)
        while at >= 0:
            if at + 1 < n and text[at + 1].isspace():
                ends.append(at + 1)
            at = text.find(mark, at + 1)
    at = text.find("\n")
    while at >= 0:
        ends.append(at + 1)
        at = text.find("\n", at + 1)
    ends.sort()
    return ends


def compile_terms(terms: Sequence[str]) -> TermSearch | None:
    """The search for ``terms`` (de-duplicated, order kept); ``None`` for no terms."""
    unique = tuple(dict.fromkeys(t for t in terms if t))
    if not unique:
        return None
    forms = tuple((form, i, numeric) for i, t in enumerate(unique) for form, numeric in _forms(t))
    return TermSearch(terms=unique, forms=forms)


def term_weights(document_frequency: Sequence[int], *, documents: int) -> tuple[float, ...]:
    """Smoothed (BM25) IDF per term: ``ln(1 + (N - df + 0.5) / (df + 0.5))``, ``N = documents``."""
    n = max(documents, 1)
    return tuple(math.log1p((n - df + 0.5) / (df + 0.5)) for df in document_frequency)


def reference_set_key_chars(
    texts: Sequence[str],
    *,
    terms: Sequence[str],
    max_keys: int,
    wanted: Sequence[bool] | None = None,
) -> tuple[tuple[int, ...], ...]:
    """Key char offsets of every text of one retrieved set (see module docstring).

    Every non-blank text counts in the weights; keys are chosen for the texts
    that ``wanted`` marks (default: all), ``()`` for the others and for blank
    texts. Each tuple lists at most ``max_keys`` distinct offsets, primary key
    first; every offset is the start of an occurrence of a term in its text.
    """
    search = compile_terms(terms)
    if search is None or max_keys < 1:
        return tuple(() for _ in texts)
    found = [search.occurrences(t) if t.strip() else [] for t in texts]
    df = [0] * len(search.terms)
    for occurrences in found:
        for term in {i for _, i in occurrences}:
            df[term] += 1
    weights = term_weights(df, documents=sum(1 for t in texts if t.strip()))
    wanted = [True] * len(texts) if wanted is None else list(wanted)
    return tuple(
        _chunk_keys(text, occurrences, weights, max_keys) if want else ()
        for text, occurrences, want in zip(texts, found, wanted, strict=True)
    )


def _chunk_keys(
    text: str, occurrences: list[tuple[int, int]], weights: Sequence[float], max_keys: int
) -> tuple[int, ...]:
    """One chunk's keys from its term ``occurrences`` (text order) and the set's ``weights``."""
    if not occurrences:
        return ()
    if len({i for _, i in occurrences}) == 1:  # one term: every sentence scores the same
        return tuple(start for start, _ in occurrences[:max_keys])
    ends = reference_sentence_ends(text)
    sentence_of = [bisect_right(ends, start) for start, _ in occurrences]
    sentence_terms: dict[int, set[int]] = {}
    for (_, term), sentence in zip(occurrences, sentence_of, strict=True):
        sentence_terms.setdefault(sentence, set()).add(term)
    score = {s: sum(weights[i] for i in sorted(ts)) for s, ts in sentence_terms.items()}
    best = min(score, key=lambda s: (-score[s], s))
    primary = min(
        (k for k, s in enumerate(sentence_of) if s == best),
        key=lambda k: (-weights[occurrences[k][1]], occurrences[k][0]),
    )
    floor = KEY_WEIGHT_RATIO * weights[occurrences[primary][1]]
    others = sorted(
        (k for k, (_, term) in enumerate(occurrences) if k != primary and weights[term] >= floor),
        key=lambda k: (-weights[occurrences[k][1]], -score[sentence_of[k]], occurrences[k][0]),
    )
    return tuple(occurrences[k][0] for k in [primary, *others[: max_keys - 1]])
