"""Default evidence of a whole chunk set in one vectorised pass (numpy).

Same result as :func:`phaseaware.assembly.evidence.search.set_key_chars` (the
obviously-correct per-chunk definition; a property test compares the two), with
work proportional to what matters:

- the set is lower-cased and joined ONCE (``"\\0"`` between texts, a non-word
  character that never matches);
- each term form is located on the code points of the joined text: the
  positions of its first two characters (one vector compare of code point
  pairs), narrowed by each next character (overlapping starts included, like a
  ``str.find`` loop);
- boundary, number and sentence-end checks classify only the characters next to
  an occurrence or a sentence mark, by code point, each distinct code point once;
- per-sentence term sets are bit masks (``np.bitwise_or.at``), scores are
  summed term by term in index order (the same floats as the reference), and
  the per-chunk choice is one ``np.lexsort``.

Python work is per chunk (the output tuples), not per occurrence or character.
More than 62 distinct terms (no bit mask), and sets with few occurrences, take
the reference path.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

import numpy as np

from phaseaware.assembly.evidence.search import (
    KEY_WEIGHT_RATIO,
    SENTENCE_MARKS,
    TermSearch,
    compile_terms,
    lower_same_length,
    set_key_chars,
    term_weights,
)

__all__ = ["fast_set_key_chars"]

_MAX_TERMS = 62
# A set of at most _SMALL_TEXTS texts and _SMALL_CHARS characters with fewer than
# _SMALL_SET term occurrences (non-overlapping ``str.count``, an estimate) takes the
# reference path: same result (property-tested), and faster there than numpy's ~1 ms of
# fixed costs (measured: 20 dense chunks, 540 occurrences: 1.3 ms vs 2.4 ms; the
# reference costs ~15 us per text, so 300 short texts: 5.0 ms vs 1.5 ms).
_SMALL_SET = 1000
_SMALL_TEXTS = 32
_SMALL_CHARS = 60_000


def fast_set_key_chars(
    texts: Sequence[str],
    *,
    terms: Sequence[str],
    max_keys: int,
    wanted: Sequence[bool] | None = None,
    vectorised_from: int = _SMALL_SET,
) -> tuple[tuple[int, ...], ...]:
    """:func:`~phaseaware.assembly.evidence.search.set_key_chars`, vectorised over the set.

    Small sets (few texts and characters, fewer than ``vectorised_from`` term
    occurrences by ``str.count``) take the reference; ``vectorised_from=0``
    always vectorises (the property tests compare that path).
    """
    if wanted is not None and not any(wanted):
        return tuple(() for _ in texts)  # every chunk brings its own evidence
    search = compile_terms(terms)
    if search is None or max_keys < 1 or len(search.terms) > _MAX_TERMS or not texts:
        return set_key_chars(texts, terms=terms, max_keys=max_keys, wanted=wanted)
    want = np.ones(len(texts), dtype=bool) if wanted is None else np.asarray(wanted, dtype=bool)
    blank = np.array([not t.strip() for t in texts], dtype=bool)
    lows = ["" if b else lower_same_length(t) for t, b in zip(texts, blank, strict=True)]
    starts = np.cumsum([0] + [len(t) + 1 for t in lows[:-1]], dtype=np.int64)
    joined = "\0".join(lows)
    if (
        vectorised_from
        and len(texts) <= _SMALL_TEXTS
        and len(joined) <= _SMALL_CHARS
        and sum(joined.count(form) for form, _, _ in search.forms) < vectorised_from
    ):
        return set_key_chars(texts, terms=terms, max_keys=max_keys, wanted=wanted)
    points = np.frombuffer(joined.encode("utf-32-le", "surrogatepass"), dtype=np.uint32)
    pos, term = _occurrences(points, search)
    chunk = np.searchsorted(starts, pos, side="right") - 1
    n_terms = len(search.terms)
    present = np.unique(chunk * n_terms + term)
    df = np.bincount(present % n_terms, minlength=n_terms)
    weights = np.asarray(term_weights(df.tolist(), documents=int((~blank).sum())))
    keep = want[chunk] & ~blank[chunk]
    pos, term, chunk = pos[keep], term[keep], chunk[keep]
    out: list[tuple[int, ...]] = [() for _ in texts]
    if not len(pos):
        return tuple(out)
    sentence = np.searchsorted(_sentence_ends(points, starts), pos, side="right")
    ids, inverse = np.unique(sentence, return_inverse=True)
    masks = np.zeros(len(ids), dtype=np.int64)
    np.bitwise_or.at(masks, inverse, np.left_shift(np.int64(1), term.astype(np.int64)))
    scores = np.zeros(len(ids), dtype=np.float64)
    for t in range(n_terms):  # index order: the reference's float sums exactly
        scores += np.where((masks >> t) & 1 == 1, weights[t], 0.0)
    score, weight = scores[inverse], weights[term]
    order = np.lexsort((pos, -weight, sentence, -score, chunk))
    first = np.ones(len(order), dtype=bool)
    first[1:] = chunk[order][1:] != chunk[order][:-1]
    primary = order[first]  # one per chunk with occurrences, in chunk order
    floor = np.zeros(len(texts))
    floor[chunk[primary]] = KEY_WEIGHT_RATIO * weight[primary]
    is_primary = np.zeros(len(pos), dtype=bool)
    is_primary[primary] = True
    rest = np.flatnonzero(~is_primary & (weight >= floor[chunk]))
    rest = rest[np.lexsort((pos[rest], -score[rest], -weight[rest], chunk[rest]))]
    rank = np.arange(len(rest)) - np.searchsorted(chunk[rest], chunk[rest], side="left")
    rest = rest[rank < max_keys - 1]
    local = (pos - starts[chunk]).tolist()
    for k in primary.tolist():
        out[int(chunk[k])] = (local[k],)
    grouped: dict[int, list[int]] = {}
    for c, k in zip(chunk[rest].tolist(), rest.tolist(), strict=True):
        grouped.setdefault(c, []).append(local[k])
    for c, group in grouped.items():
        out[c] = out[c] + tuple(group)
    return tuple(out)


def _classify(points: np.ndarray, test: Callable[[str], bool]) -> np.ndarray:
    """``test(chr(p))`` per code point, each distinct code point tested once."""
    if not len(points):
        return np.zeros(0, dtype=bool)
    unique, inverse = np.unique(points, return_inverse=True)
    return np.array([test(chr(p)) for p in unique.tolist()], dtype=bool)[inverse]


def _is_word(ch: str) -> bool:
    return ch.isalnum() or ch == "_"


def _at(points: np.ndarray, index: np.ndarray) -> np.ndarray:
    """Code points at ``index``; 0 (a non-word character) outside the text."""
    inside = (index >= 0) & (index < len(points))
    return np.where(inside, points[np.clip(index, 0, max(len(points) - 1, 0))], 0)


def _pairs(points: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Code points ``(i, i + 1)`` as one little-endian uint64, for even and odd ``i`` (views)."""
    data = np.ascontiguousarray(points, dtype="<u4")
    n = len(data)
    even = data[: 2 * (n // 2)].view("<u8")
    odd = data[1 : 1 + 2 * ((n - 1) // 2)].view("<u8") if n > 1 else even[:0]
    return even, odd


def _form_starts(points: np.ndarray, pairs: tuple[np.ndarray, np.ndarray], form: str) -> np.ndarray:
    """Every start of ``form`` in the code points (overlapping ones included), sorted."""
    codes = [ord(c) for c in form]
    size = len(points) - len(codes) + 1
    if size <= 0:
        return np.zeros(0, dtype=np.int64)
    if len(codes) == 1:
        return np.flatnonzero(points == codes[0]).astype(np.int64)
    key = np.uint64(codes[0] | (codes[1] << 32))
    even, odd = pairs
    at = np.sort(
        np.concatenate([np.flatnonzero(even == key) * 2, np.flatnonzero(odd == key) * 2 + 1])
    )
    at = at[at < size]
    for k, code in enumerate(codes[2:], start=2):
        if not len(at):
            break
        at = at[points[at + k] == code]
    return at.astype(np.int64)


def _occurrences(points: np.ndarray, search: TermSearch) -> tuple[np.ndarray, np.ndarray]:
    """(start, term index) of every occurrence, sorted by start (overlaps resolved)."""
    all_pos, all_term, all_size = [], [], []
    pairs = _pairs(points)
    for form, index, numeric in search.forms:
        at = _form_starts(points, pairs, form)
        if not len(at):
            continue
        end = at + len(form)
        ok = ~_classify(_at(points, at - 1), _is_word) & ~_classify(_at(points, end), _is_word)
        if numeric:
            digit = lambda ch: ch.isdigit()  # noqa: E731
            before = _at(points, at - 1)
            sep = (before == ord(".")) | (before == ord(","))
            ok &= ~(sep & _classify(_at(points, at - 2), digit) & (at >= 2))
            after = _at(points, end)
            sep = (after == ord(".")) | (after == ord(","))
            ok &= ~(sep & _classify(_at(points, end + 1), digit))
        all_pos.append(at[ok])
        all_term.append(np.full(int(ok.sum()), index, dtype=np.int64))
        all_size.append(np.full(int(ok.sum()), len(form), dtype=np.int64))
    if not all_pos:
        empty = np.zeros(0, dtype=np.int64)
        return empty, empty
    pos, term, size = np.concatenate(all_pos), np.concatenate(all_term), np.concatenate(all_size)
    order = np.lexsort((-size, pos))
    pos, term, size = pos[order], term[order], size[order]
    if search.nested:  # one form inside another: leftmost, then longest, no overlap
        keep, reached = [], -1
        for k, (p, s) in enumerate(zip(pos.tolist(), size.tolist(), strict=True)):
            if p >= reached:
                keep.append(k)
                reached = p + s
        pos, term = pos[keep], term[keep]
    return pos, term


def _sentence_ends(points: np.ndarray, starts: np.ndarray) -> np.ndarray:
    """Sorted sentence ends of the joined text, every text's start included."""
    head = points[:-1]
    is_mark = head == ord(SENTENCE_MARKS[0])
    for mark in SENTENCE_MARKS[1:]:
        is_mark |= head == ord(mark)
    marks = np.flatnonzero(is_mark)
    space = lambda ch: ch.isspace()  # noqa: E731
    ends = marks[_classify(points[marks + 1], space)] + 1
    lines = np.flatnonzero(points == ord("\n")) + 1
    return np.unique(np.concatenate([starts, ends, lines]))
