"""What an occurrence of a question term is: its text forms and the word-boundary rule.

A term matches case-insensitively (on :func:`lower_same_length` text) where no word
character (Python's ``\\w``: alphanumeric or underscore) touches it on either side; a
numeric form (one that starts or ends with a digit) also may not touch ``digit.`` /
``digit,`` before or ``.digit`` / ``,digit`` after it (``62`` is not found in ``3.62``). A
whole number is found with any one thousands separator used throughout (``1,000`` finds
``1000`` and ``1 000`` with a no-break space). Where occurrences overlap, the leftmost
wins, then the longer, then the earlier term.

:func:`compile_terms` prepares a term list once (remembered per term list): the forms,
de-duplicated (a form shared by two terms belongs to the earlier, which would win every
tie), and two facts about them that let the scan (``evidence.scan``) skip work:
whether two valid occurrences can overlap at all, and, for each form whose valid
occurrences never overlap one another, one regular expression that finds them all.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass

from phaseaware.caches import BoundedCache

__all__ = [
    "SEPARATOR",
    "TermSearch",
    "bounded_pattern",
    "compile_terms",
    "is_word_char",
    "lower_same_length",
    "term_forms",
    "touches_number",
]

_GROUPED = re.compile(r"\d{1,3}(?:,\d{3})+(?:\.\d+)?")  # 1,000 or 12,345.6
_GROUP_SEPARATORS = ("", ",", "\u00a0", "\u202f", "_")  # thousands separators of a number
#: The character that joins a set's texts for one scan (``evidence.scan``).
SEPARATOR = "\0"


def is_word_char(ch: str) -> bool:
    """``\\w`` of Python's ``re`` for one character (alphanumeric or underscore; a test
    checks the two agree on every code point, as ``bounded_pattern`` relies on)."""
    return ch.isalnum() or ch == "_"


def touches_number(text: str, at: int, end: int) -> bool:
    """Whether ``text[at:end]`` follows ``digit.``/``digit,`` or precedes ``.digit``/``,digit``."""
    before = at >= 2 and text[at - 1] in ".," and text[at - 2].isdigit()
    after = end + 1 < len(text) and text[end] in ".," and text[end + 1].isdigit()
    return before or after


def term_forms(term: str) -> tuple[tuple[str, bool], ...]:
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
    """The question's terms and their forms, ready to scan.

    ``forms``: ``(form, term index, numeric)``, each form once (the earliest term's).
    ``overlaps``: whether two valid occurrences may overlap (then the scan resolves
    them: leftmost, then longest, then earliest term). ``patterns[k]``: form ``k``
    where no word character touches it (:func:`bounded_pattern`), for a form that holds
    no ``SEPARATOR`` and whose valid occurrences cannot overlap one another (so
    ``finditer`` finds them all); ``None`` for the others.
    """

    terms: tuple[str, ...]
    forms: tuple[tuple[str, int, bool], ...]
    overlaps: bool
    patterns: tuple[re.Pattern[str] | None, ...]


_COMPILED: BoundedCache[tuple[str, ...], TermSearch] = BoundedCache(
    max_entries=256, name="assembly.evidence_terms"
)


def compile_terms(terms: Sequence[str]) -> TermSearch | None:
    """The search for ``terms`` (de-duplicated, order kept); ``None`` for no terms.

    Remembered per term list (a question is searched once per retrieved set).
    """
    unique = tuple(dict.fromkeys(t for t in terms if t))
    if not unique:
        return None
    known = _COMPILED.get(unique)
    if known is None:
        owner: dict[str, tuple[int, bool]] = {}
        for i, term in enumerate(unique):
            for form, numeric in term_forms(term):
                owner.setdefault(form, (i, numeric))
        forms = tuple((form, i, numeric) for form, (i, numeric) in owner.items())
        texts = [form for form, _, _ in forms]
        known = TermSearch(
            terms=unique,
            forms=forms,
            overlaps=any(_may_overlap(a, b, same=a == b) for a in texts for b in texts),
            patterns=tuple(
                None if SEPARATOR in f or _may_overlap(f, f, same=True) else bounded_pattern(f)
                for f in texts
            ),
        )
        _COMPILED.put(unique, known)
    return known


def bounded_pattern(form: str) -> re.Pattern[str]:
    """``form`` where no word character touches it: the word-boundary rule, not the
    number rule. The literal comes first, so ``re`` searches for it as a prefix (about
    ``str.find``'s speed); the character before is checked by a lookbehind."""
    literal = re.escape(form)
    return re.compile(rf"{literal}(?!\w)(?<!\w{literal})")


def _may_overlap(a: str, b: str, *, same: bool) -> bool:
    """Whether a valid occurrence of ``b`` may start inside one of ``a`` (``same``: not at
    its start). Necessary conditions only (the word-boundary rule at the edges that fall
    inside the other form; the number rule is not checked), so ``False`` is a proof and
    ``True`` only a possibility."""
    for d in range(1 if same else 0, len(a)):
        shared = min(len(a), d + len(b)) - d
        if a[d : d + shared] != b[:shared]:
            continue
        if d and is_word_char(a[d - 1]):  # b's start touches a word character of a
            continue
        if d + len(b) < len(a) and is_word_char(a[d + len(b)]):  # b's end
            continue
        if d + len(b) > len(a) and is_word_char(b[len(a) - d]):  # a's end
            continue
        return True
    return False
