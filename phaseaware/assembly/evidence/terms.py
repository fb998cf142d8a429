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
from dataclasses import dataclass, replace

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
    them: leftmost, then longest, then earliest term). ``split_safe[k]``: form ``k``
    holds no ``SEPARATOR`` and no valid occurrence of it can start inside another one
    (so ``str.split`` and ``finditer`` miss none). ``patterns``: for the split-safe forms,
    the form where no word character touches it (:func:`bounded_pattern`), ``None`` for
    the others; ``None`` altogether until the question is searched a second time, and
    for a question of more than ``_PATTERN_FORMS`` forms (compiling costs ~30 us a form,
    more than one scan with the patterns saves).
    """

    terms: tuple[str, ...]
    forms: tuple[tuple[str, int, bool], ...]
    overlaps: bool
    split_safe: tuple[bool, ...]
    patterns: tuple[re.Pattern[str] | None, ...] | None = None


# At most this many forms get patterns: compiling is ~30 us a form, so a long question's
# second search would spike (250 terms: +23 ms) before the patterns pay back.
_PATTERN_FORMS = 64
_COMPILED: BoundedCache[tuple[str, ...], TermSearch] = BoundedCache(
    max_entries=256, name="assembly.evidence_terms"
)


def compile_terms(terms: Sequence[str]) -> TermSearch | None:
    """The search for ``terms`` (de-duplicated, order kept); ``None`` for no terms.

    Remembered per term list; the second search of the same terms compiles the
    patterns (a question asked once pays for no regular expression; a question of more
    than ``_PATTERN_FORMS`` forms never does).
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
            overlaps=_any_overlap(texts),
            split_safe=tuple(_split_safe(f) for f in texts),
        )
    elif known.patterns is None and len(known.forms) <= _PATTERN_FORMS:
        known = replace(
            known,
            patterns=tuple(
                bounded_pattern(form) if safe else None
                for (form, _, _), safe in zip(known.forms, known.split_safe, strict=True)
            ),
        )
    else:
        return known
    _COMPILED.put(unique, known)
    return known


def bounded_pattern(form: str) -> re.Pattern[str]:
    """``form`` where no word character touches it: the word-boundary rule, not the
    number rule. The literal comes first, so ``re`` searches for it as a prefix (about
    ``str.find``'s speed); the character before is checked by a lookbehind."""
    literal = re.escape(form)
    return re.compile(rf"{literal}(?!\w)(?<!\w{literal})")


def _any_overlap(forms: Sequence[str]) -> bool:
    """Whether a valid occurrence of one form may start inside a valid occurrence of
    another (or of itself). It can start only at the outer form's start or right after
    one of its non-word characters, so each such offset is compared with the forms that
    begin with the character found there."""
    by_first: dict[str, list[str]] = {}
    for form in forms:
        by_first.setdefault(form[0], []).append(form)
    return any(
        _may_overlap(a, b, d, ends=True)
        for a in forms
        for d in range(len(a))
        if not (d and is_word_char(a[d - 1]))
        for b in by_first.get(a[d], ())
        if d or a != b
    )


def _split_safe(form: str) -> bool:
    """No ``SEPARATOR``, and no occurrence that may be valid starts inside another
    occurrence (valid or not) of the same form: ``str.split`` misses none."""
    return SEPARATOR not in form and not any(
        _may_overlap(form, form, d, ends=False) for d in range(1, len(form))
    )


def _may_overlap(a: str, b: str, d: int, *, ends: bool) -> bool:
    """Whether ``b`` may occur validly at offset ``d`` of an occurrence of ``a``: the two
    agree where they meet, no word character of ``a`` touches ``b``'s start and, with
    ``ends``, none touches the end of the one that ends inside the other. Necessary
    conditions only (the number rule is not checked): ``False`` is a proof."""
    shared = min(len(a), d + len(b)) - d
    if a[d : d + shared] != b[:shared] or (d and is_word_char(a[d - 1])):
        return False
    if ends and d + len(b) < len(a) and is_word_char(a[d + len(b)]):  # b ends inside a
        return False
    return not (ends and d + len(b) > len(a) and is_word_char(b[len(a) - d]))  # a inside b
