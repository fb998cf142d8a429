"""Key tokens of a chunk: where it states the evidence a question needs.

Text matching only *finds* the evidence (character offsets); every token
position comes from the tokenizer (``TokenizedText.token_at_char``). The key
token of an occurrence is the token that contains its first character.

Default evidence: the question's key terms (words minus a small stopword list,
keeping numbers, capitalised names and words of 4+ characters), matched
case-insensitively on word boundaries in the chunk text.
"""

from __future__ import annotations

import re
from collections.abc import Sequence

from phaseaware.errors import InputError

__all__ = [
    "STOPWORDS",
    "question_terms",
    "find_key_chars",
    "evidence_snippet",
]

_STOPWORD_TEXT = """a about above after again all also am an and any are as at be been before being
    between both but by can could did do does doing done during each few for from had has
    have having he her here hers him his how i if in into is it its itself just me more most
    my no nor not now of off on once only or other our out over own same she should so some
    such than that the their them then there these they this those through to too under
    until up very was we were what when where which while who whom why will with would you
    your tell give find name list show please according text document context question
    answer"""
STOPWORDS = frozenset(_STOPWORD_TEXT.split())
_WORD = re.compile(r"\w+", re.UNICODE)
_SENTENCE_END = re.compile(r"[.!?。！？](?=\s)|\n")


def question_terms(question: str) -> tuple[str, ...]:
    """Key terms of ``question`` (lower-cased, de-duplicated, in order of appearance)."""
    terms: list[str] = []
    seen: set[str] = set()
    for match in _WORD.finditer(question):
        word = match.group(0)
        lower = word.casefold()
        if lower in STOPWORDS or lower in seen:
            continue
        is_number = any(ch.isdigit() for ch in word)
        is_name = word[:1].isupper()
        if is_number or is_name or len(word) >= 4:
            seen.add(lower)
            terms.append(lower)
    return tuple(terms)


def find_key_chars(
    text: str,
    *,
    chunk_id: str,
    evidence: Sequence[str] = (),
    terms: Sequence[str] = (),
    max_keys: int = 8,
) -> tuple[int, ...]:
    """Sorted character offsets in ``text`` where key evidence begins (at most ``max_keys``).

    With ``evidence``: every occurrence of every string; a string that does not
    occur raises ``InputError`` naming the chunk. Otherwise: word-boundary,
    case-insensitive matches of ``terms``. Offsets are unique.
    """
    offsets: set[int] = set()
    if evidence:
        for item in evidence:
            start = text.find(item)
            if start < 0:
                raise InputError(
                    f"evidence {item!r} does not occur in chunk {chunk_id!r}; "
                    "evidence strings must be copied verbatim from the chunk text"
                )
            while start >= 0:
                offsets.add(start)
                start = text.find(item, start + 1)
    elif terms:
        pattern = re.compile(
            r"(?<!\w)(?:" + "|".join(re.escape(t) for t in sorted(set(terms))) + r")(?!\w)",
            re.IGNORECASE | re.UNICODE,
        )
        offsets.update(m.start() for m in pattern.finditer(text))
    return tuple(sorted(offsets)[:max_keys])


def evidence_snippet(text: str, char_offset: int, *, max_chars: int) -> tuple[int, int]:
    """Char span ``[start, end)`` of the sentence or line of ``text`` around ``char_offset``.

    The whole (whitespace-trimmed) text when it has at most ``max_chars``
    characters; a longer sentence is cut to ``max_chars`` characters starting at
    the sentence start, or at ``char_offset`` when the key lies further in. The
    span always contains ``char_offset`` and never starts or ends in whitespace.
    """
    start, end = _trim(text, 0, len(text))
    if end - start > max_chars:
        for match in _SENTENCE_END.finditer(text, 0, char_offset):
            start = match.end()
        end_match = _SENTENCE_END.search(text, char_offset)
        end = end_match.end() if end_match else len(text)
        start, end = _trim(text, start, end)
        if end - start > max_chars:
            if char_offset - start >= max_chars // 2:
                start = char_offset
            end = min(len(text), start + max_chars)  # a key near the end: never past it
            start, end = _trim(text, start, end)
    return min(start, char_offset), max(end, char_offset + 1)


def _trim(text: str, start: int, end: int) -> tuple[int, int]:
    while start < end and text[start].isspace():
        start += 1
    while end > start and text[end - 1].isspace():
        end -= 1
    return start, end
