"""Default evidence over a retrieved set: weighted question terms, keys by weight.

Without evidence strings, the key tokens of a chunk are found from the
question's key terms (``evidence.question_terms``):

1. **One scan per chunk set.** The terms are prepared once per question
   (``evidence.terms.compile_terms``); the set is joined and lower-cased once and
   each term form is found in it by one expression that searches the literal as a
   prefix (near ``str.find``'s speed; one alternation of all forms costs 3-4x) and
   checks the word boundaries as lookarounds (``evidence.scan``). Keys are then
   read off sorted position lists: one slice per chunk wherever one sentence holds
   the chunk's occurrences, per-occurrence work only where they span sentences.
2. **Weights.** Each term is weighted by how distinctive it is across the
   retrieved set: the smoothed (BM25) inverse document frequency
   ``ln(1 + (N - df + 0.5) / (df + 0.5))`` over the ``N`` non-blank chunks, ``df``
   of them containing it. A word that recurs in every chunk ("access",
   "code") weighs about ``0.5 / N``; a name found in one chunk of twenty, 2.6.
   Weights depend on the set of texts only, never on their order.
3. **The best sentence.** A sentence (split as ``evidence.evidence_snippet``
   does: ``.!?`` before whitespace, or a newline) scores the sum of the weights
   of the distinct terms it contains; the highest score wins, the earliest
   sentence on ties.
4. **Keys by weight.** The primary key is the first occurrence, in the best
   sentence, of its most distinctive term. The other keys are occurrences of
   terms weighing at least ``KEY_WEIGHT_RATIO`` times the primary term, most
   distinctive first, then by the score of their sentence, then text order;
   at most ``max_keys`` in all, returned primary first. Terms weighing much
   less than the primary (words common to every chunk next to a name) are no
   keys at all, so the planner spends its padding on the positions that matter.
   A chunk that mentions one term only gets its first ``max_keys``
   occurrences in text order, as before.

Matching (``evidence.terms``): case-insensitive on word boundaries; number terms
match only whole numbers (``62`` is not found in ``3.62``) and tolerate thousands
separators (``1,000`` finds ``1000`` and ``1 000`` with a no-break space). Pure and
deterministic: same texts and terms, same keys. ``tests/support/evidence_reference.py``
keeps the earlier per-chunk ``str.find`` search as the oracle: the same keys on every
input (property-tested).
"""

from __future__ import annotations

import math
import re
from bisect import bisect_left, bisect_right
from collections.abc import Sequence
from functools import partial
from itertools import chain
from operator import lt

from phaseaware.assembly.evidence.scan import scan_set
from phaseaware.assembly.evidence.terms import compile_terms

__all__ = [
    "KEY_WEIGHT_RATIO",
    "SENTENCE_END",
    "SENTENCE_MARKS",
    "sentence_ends",
    "set_key_chars",
    "term_weights",
]

#: Other keys of a chunk are occurrences of terms at least this fraction as distinctive
#: as its primary key's term.
KEY_WEIGHT_RATIO = 0.5

#: Where a sentence ends: ``.!?`` (or their CJK forms) before whitespace, or a newline.
SENTENCE_END = re.compile(r"[.!?。！？](?=\s)|\n")
#: The characters that end a sentence before whitespace.
SENTENCE_MARKS = ".!?。！？"


def sentence_ends(text: str) -> list[int]:
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


def term_weights(document_frequency: Sequence[int], *, documents: int) -> tuple[float, ...]:
    """Smoothed (BM25) IDF per term: ``ln(1 + (N - df + 0.5) / (df + 0.5))``, ``N = documents``."""
    n = max(documents, 1)
    return tuple(math.log1p((n - df + 0.5) / (df + 0.5)) for df in document_frequency)


def set_key_chars(
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
    want = [True] * len(texts) if wanted is None else list(wanted)
    if len(want) != len(texts):
        raise ValueError(f"wanted has {len(want)} flags for {len(texts)} texts; pass one per text")
    blank = [not t.strip() for t in texts]
    if not any(w and not b for w, b in zip(want, blank, strict=True)):
        return tuple(() for _ in texts)
    scan = scan_set(texts, blank=blank, search=search)
    df = [sum(map(lt, cut, cut[1:])) for cut in scan.cuts]  # texts holding each term
    weights = term_weights(df, documents=blank.count(False))
    levels = _weight_levels(scan.positions, weights)
    every = levels[0][1] if len(levels) == 1 else sorted(chain(*scan.positions))
    bounds = [*scan.starts, len(scan.text)]
    cut = list(map(partial(bisect_left, every), bounds))  # text c: every[cut[c]:cut[c + 1]]
    ends: list[int] | None = None
    out: list[tuple[int, ...]] = []
    for c, base in enumerate(scan.starts):
        lo, hi = cut[c], cut[c + 1]
        if lo == hi or not want[c] or blank[c]:
            out.append(())
            continue
        if hi - lo > 1 and ends is None:
            ends = sentence_ends(scan.text)
        if ends is None or bisect_right(ends, every[lo]) == bisect_right(ends, every[hi - 1]):
            # one sentence holds every occurrence: keys by weight, then text order
            if len(levels) == 1:
                keys = every[lo : min(hi, lo + max_keys)]
            else:
                keys = _level_keys(levels, base, bounds[c + 1], max_keys)
        else:
            held = {
                t: p[term_cut[c] : term_cut[c + 1]]
                for t, (p, term_cut) in enumerate(zip(scan.positions, scan.cuts, strict=True))
                if term_cut[c] < term_cut[c + 1]
            }
            if len(held) == 1:  # one term: every sentence scores the same, text order
                keys = _level_keys(levels, base, bounds[c + 1], max_keys)
            else:
                keys = _sentence_keys(held, weights, max_keys, ends)
        out.append(tuple(map((-base).__add__, keys)))
    return tuple(out)


def _weight_levels(
    positions: Sequence[list[int]], weights: Sequence[float]
) -> list[tuple[float, list[int]]]:
    """(weight, the positions of every term of that weight, sorted), heaviest first; terms
    that occur nowhere are left out."""
    terms_of: dict[float, list[int]] = {}
    for t, w in enumerate(weights):
        if positions[t]:
            terms_of.setdefault(w, []).append(t)
    return [
        (w, positions[ts[0]] if len(ts) == 1 else sorted(chain(*(positions[t] for t in ts))))
        for w, ts in sorted(terms_of.items(), reverse=True)
    ]


def _level_keys(
    levels: list[tuple[float, list[int]]], start: int, end: int, max_keys: int
) -> list[int]:
    """Keys of the text at ``[start, end)`` when one sentence holds all its occurrences
    (or they are one term's): every sentence scores the same, so the keys are the
    occurrences of terms weighing at least ``KEY_WEIGHT_RATIO`` times the heaviest there,
    by weight, then text order (the first is the primary key)."""
    keys: list[int] = []
    floor: float | None = None
    for weight, found in levels:
        if floor is not None and weight < floor:
            break
        i, j = bisect_left(found, start), bisect_left(found, end)
        if i == j:
            continue
        if floor is None:
            floor = KEY_WEIGHT_RATIO * weight
        keys += found[i : min(j, i + max_keys - len(keys))]
        if len(keys) == max_keys:
            break
    return keys


def _sentence_keys(
    held: dict[int, list[int]], weights: Sequence[float], max_keys: int, ends: Sequence[int]
) -> list[int]:
    """Keys of a chunk whose occurrences (``held``: positions by term) span sentences
    (``ends``: sorted sentence ends), as the module docstring states them."""
    occurrences = sorted((p, t) for t, found in held.items() for p in found)
    sentence_of = [bisect_right(ends, p) for p, _ in occurrences]
    sentence_terms: dict[int, set[int]] = {}
    for (_, t), s in zip(occurrences, sentence_of, strict=True):
        sentence_terms.setdefault(s, set()).add(t)
    score = {s: sum(weights[i] for i in sorted(ts)) for s, ts in sentence_terms.items()}
    top = max(score.values())
    best = min(s for s, value in score.items() if value == top)  # the earliest on ties
    lightness, primary = min(  # the heaviest term's first occurrence in the best sentence
        (-weights[t], p) for (p, t), s in zip(occurrences, sentence_of, strict=True) if s == best
    )
    floor = KEY_WEIGHT_RATIO * -lightness
    others = sorted(
        (-weights[t], -score[s], p)
        for (p, t), s in zip(occurrences, sentence_of, strict=True)
        if weights[t] >= floor and p != primary
    )
    return [primary, *(p for _, _, p in others[: max_keys - 1])]
