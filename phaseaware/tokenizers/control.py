"""Control tokens in untrusted text: find every one and neutralise it (or refuse).

Retrieved chunks, evidence, the question, the system prompt and message contents
are user-supplied strings. Every adapter parses special-token strings inside the
text it encodes (the convention of ``tokenizers.base``), so a chunk holding
``<｜User｜>`` or ``<|im_start|>system`` would otherwise become a real chat turn.

The control strings of one call are the tokenizer's special/added-token strings
(``special_strings``) plus the chat format's own markers, which each format module
owns (``markers``; :func:`phaseaware.chat.formats.format_markers` by name), e.g.
ChatML's ``<|im_start|>`` even where the vocabulary has no such special token, or
DeepSeek's ``｜DSML｜`` tool-call marker. This module keeps no list of its own.

**Neutralisation** (the documented, visible rule): every occurrence of a control
string gets :data:`BREAK` (U+00B7 MIDDLE DOT, ``·``) inserted after its first
character: ``<|im_start|>`` becomes ``<·|im_start|>``, ``<｜User｜>`` becomes
``<·｜User｜>``, ``<think>`` becomes ``<·think>``. The scan visits *every*
start position, overlapping occurrences included, so no control string survives:
``BREAK`` occurs in no control string (checked), every control string has two or
more characters, and each BREAK-free piece of the output is a piece of the input
that contains no occurrence start except possibly its last character. The
assembly pipeline also counts control strings in the final prompt against its
template's, and the property test counts the ids of the re-tokenized prompt.

Policy ``"refuse"`` raises :class:`ControlTokenError` instead.
"""

from __future__ import annotations

import bisect
import re
import sys
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Protocol, cast, runtime_checkable

from phaseaware.caches import BoundedCache
from phaseaware.errors import ControlTokenError, InputError
from phaseaware.tokenizers.base import Tokenizer, implements

__all__ = [
    "BREAK",
    "CONTROL_POLICIES",
    "ControlTokenError",
    "ControlScanner",
    "Neutralized",
    "SpecialStringsTokenizer",
    "control_ids",
    "scanner_for",
    "special_strings",
]

BREAK = "\u00b7"
_SCAN_MEMO_MIN = 4096  # texts this long: their scan is remembered to resume from
_SCAN_MEMO_ENTRIES = 8
_SCAN_MEMO_BYTES = 64 << 20
_HIT_MEMO_BYTES = 16 << 20  # texts whose control strings ``clean`` remembers, at most


@dataclass(frozen=True)
class _Scan:
    """A finished scan of ``text``: ``found`` matches; it started at ``resumed_at`` (the
    matches before it not listed), then found the matches ``starts[i]:ends[i]``."""

    text: str
    found: int
    resumed_at: int
    starts: list[int]
    ends: list[int]


CONTROL_POLICIES = ("neutralize", "refuse")


@runtime_checkable
class SpecialStringsTokenizer(Protocol):
    """A tokenizer that lists the strings it parses as special/added tokens."""

    @property
    def special_strings(self) -> frozenset[str]: ...

    @property
    def unknown_text(self) -> str: ...


@dataclass(frozen=True)
class Neutralized:
    """One control string found in a user string and broken with :data:`BREAK`.

    ``where``: ``"chunk <id>"``, ``"chunk <id> evidence[k]"``, ``"question"``,
    ``"system"`` or ``"messages[i]"``; ``offset``: its character offset in the
    caller's original string; ``text``: the control string found (for a message's
    text at the ``{context}`` slot: the part of one that the context could complete,
    closed off with :data:`BREAK` at the slot).
    """

    where: str
    offset: int
    text: str


def special_strings(tokenizer: Tokenizer) -> frozenset[str]:
    """The strings ``tokenizer`` parses as special tokens (BOS/EOS at least)."""
    found: set[str] = set()
    if isinstance(tokenizer, SpecialStringsTokenizer):
        found.update(tokenizer.special_strings)
    for name in ("bos_text", "eos_text"):
        value = getattr(tokenizer, name, "")
        if isinstance(value, str):
            found.add(value)
    return frozenset(s for s in found if len(s) >= 2 and s.strip())


def control_ids(tokenizer: Tokenizer, strings: Iterable[str]) -> frozenset[int]:
    """Ids of the control strings that encode to exactly one token.

    The unknown token is left out: out-of-vocabulary text encodes to it, so it is
    no sign of a control string (its string itself is still neutralised).
    """
    unknown: set[int] = set()
    if isinstance(tokenizer, SpecialStringsTokenizer) and tokenizer.unknown_text:
        unknown.update(tokenizer.encode(tokenizer.unknown_text))
    ids: set[int] = set()
    for text in strings:
        encoded = tokenizer.encode(text)
        if len(encoded) == 1 and encoded[0] not in unknown:
            ids.add(encoded[0])
    return frozenset(ids)


class ControlScanner:
    """Finds and breaks the control strings of one tokenizer + chat format."""

    def __init__(self, strings: Iterable[str], *, policy: str = "neutralize") -> None:
        if policy not in CONTROL_POLICIES:
            raise InputError(
                f"control_tokens={policy!r} is unknown; use one of {', '.join(CONTROL_POLICIES)}"
            )
        self.policy = policy
        self.strings = frozenset(s for s in strings if len(s) >= 2)
        if any(BREAK in s for s in self.strings):
            raise InputError(f"a control string contains the break character {BREAK!r}")
        self._pattern = re.compile(longest_match_pattern(self.strings)) if self.strings else None
        # candidates first: one character class scans fast; the trie is tried only there
        firsts = sorted({s[0] for s in self.strings})
        self._first = re.compile("[" + "".join(map(re.escape, firsts)) + "]") if firsts else None
        self._ids: dict[tuple[str, str], frozenset[int]] = {}
        self._partials: tuple[frozenset[str], frozenset[str], int] | None = None
        # recent long scans, to resume a text that starts with one (keyed cheaply; the
        # prefix is checked on the text itself)
        # the occurrences in texts cleaned recently (the same chunks come back call after call)
        self._hits: BoundedCache[str, tuple[tuple[int, str], ...]] = BoundedCache(
            max_bytes=_HIT_MEMO_BYTES,
            size_of=lambda text, hits: sys.getsizeof(text) + 64 * (len(hits) + 1),
        )
        self._scans: BoundedCache[tuple[int, str], _Scan] = BoundedCache(
            max_entries=_SCAN_MEMO_ENTRIES,
            max_bytes=_SCAN_MEMO_BYTES,
            size_of=lambda _, scan: sys.getsizeof(scan.text) + 16 * len(scan.starts),
        )

    def _partial_sets(self) -> tuple[frozenset[str], frozenset[str], int]:
        """(proper prefixes, proper suffixes, longest control string), built once."""
        if self._partials is None:
            heads = frozenset(s[:k] for s in self.strings for k in range(1, len(s)))
            tails = frozenset(s[k:] for s in self.strings for k in range(1, len(s)))
            self._partials = (heads, tails, max(map(len, self.strings), default=0))
        return self._partials

    def open_end(self, text: str) -> str:
        """The longest end of ``text`` that a control string starts with but does not end
        at (``""``: none): text after it could complete a control string."""
        heads, _, longest = self._partial_sets()
        for k in range(min(longest - 1, len(text)), 0, -1):
            if text[-k:] in heads:
                return text[-k:]
        return ""

    def open_start(self, text: str) -> str:
        """The longest start of ``text`` that a control string ends with but does not
        start with (``""``: none): text before it could begin that control string."""
        _, tails, longest = self._partial_sets()
        for k in range(min(longest - 1, len(text)), 0, -1):
            if text[:k] in tails:
                return text[:k]
        return ""

    def ids(self, tokenizer: Tokenizer) -> frozenset[int]:
        """``control_ids`` of this scanner's strings under ``tokenizer`` (cached)."""
        key = (tokenizer.spec, tokenizer.fingerprint())
        if key not in self._ids:
            self._ids[key] = control_ids(tokenizer, self.strings)
        return self._ids[key]

    def _search(self, text: str, pos: int) -> re.Match[str] | None:
        """``self._pattern.search(text, pos)``, trying the pattern only where a control
        string's first character stands (the leftmost such match is the search's)."""
        assert self._pattern is not None and self._first is not None
        while True:
            candidate = self._first.search(text, pos)
            if candidate is None:
                return None
            match = self._pattern.match(text, candidate.start())
            if match is not None:
                return match
            pos = candidate.start() + 1

    def count(self, text: str) -> int:
        """Non-overlapping occurrences of control strings in ``text`` (longest first).

        A long text that starts with one counted recently (an agent's conversation,
        resent with one more message each step) is scanned from near the end of that
        one: the scan's state there is remembered (:meth:`_resume`), so the cost is
        the new text's, and the count is the same as a scan from the start."""
        if self._pattern is None:
            return 0
        found, pos = self._resume(text)
        resumed_at = pos
        starts: list[int] = []
        ends: list[int] = []
        while (match := self._search(text, pos)) is not None:
            found += 1
            pos = match.end()
            starts.append(match.start())
            ends.append(pos)
        if len(text) >= _SCAN_MEMO_MIN:
            self._scans.put((len(text), text[:64]), _Scan(text, found, resumed_at, starts, ends))
        return found

    def _resume(self, text: str) -> tuple[int, int]:
        """(matches so far, position) at which a scan of ``text`` may start instead of 0:
        where a remembered scan of the longest remembered prefix of ``text`` stood at
        ``limit`` = that prefix's length - the longest control string. Each match
        decision before ``limit`` read characters of that prefix only, so a scan of
        ``text`` makes the same ones; a match starting before ``limit`` may end after
        it (the scan resumes at its end)."""
        if len(text) < _SCAN_MEMO_MIN:
            return 0, 0
        best: _Scan | None = None
        for key in self._scans.snapshot_keys():
            scan = self._scans.get(key)
            if (
                scan is not None
                and len(scan.text) <= len(text)
                and (best is None or len(scan.text) > len(best.text))
                and text.startswith(scan.text)
            ):
                best = scan
        if best is None:
            return 0, 0
        limit = len(best.text) - self._partial_sets()[2]
        if limit <= best.resumed_at:  # that scan's own starting state holds for text too
            return best.found - len(best.starts), best.resumed_at
        k = bisect.bisect_left(best.starts, limit)  # its matches starting before limit
        found = best.found - len(best.starts) + k
        return found, max(limit, best.ends[k - 1]) if k else limit

    def _find_all(self, text: str) -> tuple[tuple[int, str], ...]:
        """(offset, control string) of every occurrence in ``text``, overlapping ones too."""
        hits: list[tuple[int, str]] = []
        pos = 0
        while (match := self._search(text, pos)) is not None:
            hits.append((match.start(), match.group()))
            pos = match.start() + 1  # next start, overlapping occurrences included
        return tuple(hits)

    def first(self, text: str, *, where: str) -> Neutralized | None:
        """The first control string in ``text`` (``None``: there is none); never raises."""
        if self._pattern is None or not text:
            return None
        match = self._search(text, 0)
        if match is None:
            return None
        return Neutralized(where=where, offset=match.start(), text=match.group())

    def clean(self, text: str, *, where: str) -> tuple[str, tuple[Neutralized, ...]]:
        """``text`` with every control string broken, and what was broken.

        Raises :class:`ControlTokenError` under policy ``"refuse"``.
        """
        if self._pattern is None or not text:
            return text, ()
        hits = self._hits.get(text)
        if hits is None:
            hits = self._find_all(text)
            self._hits.put(text, hits)
        if not hits:
            return text, ()
        found: list[Neutralized] = []
        pieces: list[str] = []
        last = 0
        for start, string in hits:
            found.append(Neutralized(where=where, offset=start, text=string))
            pieces.append(text[last : start + 1])
            pieces.append(BREAK)
            last = start + 1
        if self.policy == "refuse":
            first = found[0]
            raise ControlTokenError(
                f"{where} holds the control token {first.text!r} at char {first.offset} "
                f"({len(found)} in all); remove it, or use control_tokens='neutralize' "
                f"(the default) to break it as {_broken(first.text)!r}",
                suggests_neutralize=True,
            )
        pieces.append(text[last:])
        return "".join(pieces), tuple(found)


_Trie = dict[str, "_Trie"]
_TRIE_DEPTH = 200  # longer control strings: one flat alternation (no deep recursion)


def longest_match_pattern(strings: Iterable[str]) -> str:
    """A regex matching, at each position, the longest of ``strings`` that starts there.

    The same matches as ``"|".join`` of the strings longest first, written as a trie
    (common prefixes once): a 1,283-string vocabulary compiles in ~11 ms instead of
    ~38 ms. At each node one child at most can match the next character, and the
    optional group is greedy: the deepest string end on the text's path wins.
    """
    strings = list(strings)
    if any(len(text) > _TRIE_DEPTH for text in strings):  # deep nesting: the plain alternation
        return "|".join(map(re.escape, sorted(strings, key=lambda s: (-len(s), s))))
    root: _Trie = {}
    for text in strings:
        node = root
        for ch in text:
            node = node.setdefault(ch, {})
        node[""] = {}  # a string ends here

    def emit(node: _Trie) -> str:
        branches = [re.escape(ch) + emit(node[ch]) for ch in sorted(node) if ch]
        if not branches:
            return ""
        body = branches[0] if len(branches) == 1 else "(?:" + "|".join(branches) + ")"
        return f"(?:{body})?" if "" in node else body

    return emit(root)


def _broken(text: str) -> str:
    return text[:1] + BREAK + text[1:]


_SCANNERS: BoundedCache[tuple[frozenset[str], str], ControlScanner] = BoundedCache(
    max_entries=32, name="tokenizers.control_scanners"
)


def _cached(strings: frozenset[str], policy: str) -> ControlScanner:
    scanner = _SCANNERS.get((strings, policy))
    if scanner is None:
        scanner = ControlScanner(strings, policy=policy)
        _SCANNERS.put((strings, policy), scanner)
    return scanner


# scanners by (the tokenizer's special_strings object, bos, eos, markers, policy); the entry
# holds that object, so its id is not reused while the entry lives
_BY_SPECIALS: BoundedCache[
    tuple[int, object, object, tuple[str, ...], str], tuple[object, ControlScanner]
] = BoundedCache(max_entries=32, name="tokenizers.control_scanners_by_tokenizer")


def scanner_for(
    tokenizer: Tokenizer, *, markers: Iterable[str] = (), policy: str = "neutralize"
) -> ControlScanner:
    """The scanner of ``tokenizer``'s special strings plus a chat format's ``markers``
    (``chat_format.markers``, or ``format_markers(name)`` of :mod:`phaseaware.chat.formats`).

    A tokenizer that hands back the same ``special_strings`` object each time (the
    Hugging Face adapter: 1,283 strings for DeepSeek-V4) gets its scanner without
    rebuilding the string set.
    """
    if isinstance(markers, str):
        raise InputError("markers must be a list of control strings, not one string")
    markers = tuple(markers)
    listed = (
        cast(SpecialStringsTokenizer, tokenizer).special_strings
        if implements(tokenizer, SpecialStringsTokenizer)
        else None
    )
    key = (
        id(listed), getattr(tokenizer, "bos_text", None), getattr(tokenizer, "eos_text", None),
        markers, policy,
    )  # fmt: skip
    if listed is not None:
        hit = _BY_SPECIALS.get(key)
        if hit is not None and hit[0] is listed:
            return hit[1]
    strings = special_strings(tokenizer) | frozenset(markers)
    scanner = _cached(strings, policy)
    if listed is not None:
        _BY_SPECIALS.put(key, (listed, scanner))
    return scanner
