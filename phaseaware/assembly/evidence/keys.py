"""Key tokens of a chunk: where it states the evidence a question needs.

Text matching only *finds* the evidence (character offsets); every token
position comes from the tokenizer (``TokenizedText.token_at_char``). The key
token of an occurrence is the token that contains its first character.

Default evidence: the question's key terms (words minus a small stopword list,
keeping numbers, ids such as ``Helios-7`` or ``3.62``, capitalised names and
words of 4+ characters), weighted by how distinctive they are across the
retrieved set, matched case-insensitively on word boundaries; each chunk's
keys are chosen by weight, the best sentence's most distinctive term first
(``evidence.search``). ``chunk_key_chars`` is the entry point for a chunk set.
"""

from __future__ import annotations

import re
from collections.abc import Sequence

from phaseaware.assembly.evidence.search import SENTENCE_END, set_key_chars
from phaseaware.assembly.inputs.chunks import Chunk
from phaseaware.errors import InputError

__all__ = [
    "STOPWORDS",
    "question_terms",
    "find_key_chars",
    "chunk_key_chars",
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
# a word, or an id/number joined by - . , / : (Helios-7, 3.62, 1,000, kb-recall)
_WORD = re.compile(r"\w+(?:[-.,/:]\w+)*", re.UNICODE)
_PART = re.compile(r"\w+", re.UNICODE)


def question_terms(question: str) -> tuple[str, ...]:
    """Key terms of ``question`` (lower-cased, de-duplicated, in order of appearance).

    An id joined by ``- . , / :`` (``Helios-7``, ``3.62``) is one term; its
    word parts that qualify on their own follow it (``helios``).
    """
    terms: list[str] = []
    seen: set[str] = set()

    def add(word: str) -> None:
        folded = word.casefold()
        if folded in STOPWORDS or folded in seen:
            return
        is_number = any(ch.isdigit() for ch in word)
        is_name = word[:1].isupper()
        if is_number or is_name or len(word) >= 4:
            seen.add(folded)
            terms.append(word.lower())

    for match in _WORD.finditer(question):
        word = match.group(0)
        add(word)
        parts = _PART.findall(word)
        if len(parts) > 1:
            for part in parts:
                if not any(ch.isdigit() for ch in part):
                    add(part)
    return tuple(terms)


def find_key_chars(
    text: str,
    *,
    chunk_id: str,
    evidence: Sequence[str] = (),
    terms: Sequence[str] = (),
    max_keys: int = 8,
) -> tuple[int, ...]:
    """Character offsets in ``text`` where key evidence begins (at most ``max_keys``, unique).

    With ``evidence``: every occurrence of every string, sorted; a string that
    does not occur raises ``InputError`` naming the chunk. Otherwise: default
    evidence for ``text`` as a set of one (``chunk_key_chars`` weights terms
    across a whole retrieved set), primary key first.
    """
    if evidence:
        return _evidence_chars(text, chunk_id=chunk_id, evidence=evidence, max_keys=max_keys)
    return set_key_chars([text], terms=terms, max_keys=max_keys)[0]


def chunk_key_chars(
    chunks: Sequence[Chunk], *, terms: Sequence[str], max_keys: int
) -> tuple[tuple[int, ...], ...]:
    """Key char offsets of every chunk of one retrieved set (input order).

    A blank chunk has none. A chunk with evidence strings gets every occurrence
    of them (sorted, at most ``max_keys``; a missing string raises
    ``InputError``). The others get default evidence: question ``terms``
    weighted across ALL non-blank chunks of the set, keys chosen by weight,
    primary key first (``evidence.search.set_key_chars``).
    """
    blank = [not c.text.strip() for c in chunks]
    defaults = set_key_chars(
        [c.text for c in chunks],
        terms=terms,
        max_keys=max_keys,
        wanted=[not (b or c.evidence) for c, b in zip(chunks, blank, strict=True)],
    )
    return tuple(
        ()
        if b
        else _evidence_chars(c.text, chunk_id=c.id or "", evidence=c.evidence, max_keys=max_keys)
        if c.evidence
        else keys
        for c, b, keys in zip(chunks, blank, defaults, strict=True)
    )


def _evidence_chars(
    text: str, *, chunk_id: str, evidence: Sequence[str], max_keys: int
) -> tuple[int, ...]:
    offsets: set[int] = set()
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
        for match in SENTENCE_END.finditer(text, 0, char_offset):
            start = match.end()
        end_match = SENTENCE_END.search(text, char_offset)
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
