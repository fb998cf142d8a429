"""Cut positions of a text, per tokenizer family: where windowed verification may split it.

A *cut* ``p`` of a text ``T`` is a position at which the tokenizer's tokens of
``T`` are the tokens of ``T[:p]`` followed by those of ``T[p:]`` (shifted), in
every text that holds the same two characters ``T[p-1]``, ``T[p]`` there. Each
family's rule decides a cut from those two characters alone; the arguments
are in ``phaseaware.assembly.retokenize.windowed`` (tiktoken) and ``hf_windowed`` (DeepSeek-V4). A :class:`CutRule`
finds a chunk's first and last cut with one regex search each (the last one
searched backwards), so a chunk costs two C-level searches whatever its length.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field

import regex

__all__ = ["CutRule", "TIKTOKEN_CUTS", "pair_cuts"]


@dataclass(frozen=True, eq=False)
class CutRule:
    """Cuts: where the zero-width regex ``pattern`` matches and the pair there is not banned.

    ``banned`` holds the two-character strings that ``pattern`` would cut but
    must not (an added token holds them); they are rare, so they are skipped
    after the C-level search instead of inside it.
    """

    pattern: str
    banned: frozenset[str]
    forward: regex.Pattern[str]
    backward: regex.Pattern[str]  # the same pattern searched from the end (REVERSE)
    _memo: dict[str, bool] = field(default_factory=dict, repr=False)

    @classmethod
    def compile(cls, pattern: str, banned: Iterable[str] = ()) -> CutRule:
        forward = regex.compile(pattern)
        return cls(pattern, frozenset(banned), forward, regex.compile(pattern, regex.REVERSE))

    def core(self, text: str, start: int, end: int, min_core: int) -> tuple[int, int] | None:
        """[a, b): the first and last cut strictly inside ``text[start:end]``; None if
        there is none or ``b - a < min_core``. Lookarounds see ``text[start]`` and
        ``text[end - 1]`` but nothing outside, so both characters of every cut pair lie
        in the chunk."""
        first = self.forward.search(text, start + 1, end)
        while first is not None and text[first.start() - 1 : first.start() + 1] in self.banned:
            first = self.forward.search(text, first.start() + 1, end)
        if first is None:
            return None
        a = b = first.start()
        last = self.backward.search(text, a, end)
        while last is not None and text[last.start() - 1 : last.start() + 1] in self.banned:
            last = self.backward.search(text, a, last.start())
        if last is not None:
            b = last.start()
        return (a, b) if b - a >= min_core else None

    def at(self, text: str, p: int) -> bool:
        """Whether ``0 < p < len(text)`` is a cut of ``text`` (memoised by its pair)."""
        if not 0 < p < len(text):
            return False
        pair = text[p - 1 : p + 1]
        known = self._memo.get(pair)
        if known is None:
            if len(self._memo) > 1 << 16:
                self._memo.clear()
            known = pair not in self.banned and self.forward.search(pair, 1, 2) is not None
            self._memo[pair] = known
        return known

    def positions(self, text: str) -> list[int]:
        """Every cut of ``text`` (for tests)."""
        found = (m.start() for m in self.forward.finditer(text))
        return [p for p in found if text[p - 1 : p + 1] not in self.banned]


TIKTOKEN_CUTS = CutRule.compile(r"(?<=\p{L})(?=[^\p{L}\p{M}'\p{Cn}])|(?<=\n)(?=[\p{L}\p{Nd}])")


def pair_cuts(rules: Iterable[str], forbidden: Iterable[str]) -> CutRule:
    """A rule from ``(?<=X)(?=Y)`` alternatives, minus every two-character string in
    ``forbidden`` (pairs that some added token holds: no cut may fall inside one)."""
    pattern = "|".join(rules)
    plain = regex.compile(pattern)
    banned = [pair for pair in forbidden if plain.search(pair, 1, 2) is not None]
    return CutRule.compile(pattern, banned)
