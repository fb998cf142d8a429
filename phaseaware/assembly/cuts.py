"""Cut positions of a text, per tokenizer family: where windowed verification may split it.

A *cut* ``p`` of a text ``T`` is a position at which the tokenizer's tokens of
``T`` are the tokens of ``T[:p]`` followed by those of ``T[p:]`` (shifted), in
every text that holds the same two characters ``T[p-1]``, ``T[p]`` there. Each
family's rule decides a cut from those two characters alone; the arguments
are in ``stitch`` (tiktoken) and ``stitch_hf`` (DeepSeek-V4). A :class:`CutRule`
finds a chunk's first and last cut with one regex search each (the last one
searched backwards), so a chunk costs two C-level searches whatever its length.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass

import regex

__all__ = ["CutRule", "TIKTOKEN_CUTS", "pair_cuts"]


@dataclass(frozen=True, eq=False)
class CutRule:
    """A zero-width regex matching exactly the cuts; ``core`` finds a chunk's first and last."""

    pattern: str
    forward: regex.Pattern[str]
    backward: regex.Pattern[str]  # the same pattern searched from the end (REVERSE)

    @classmethod
    def compile(cls, pattern: str) -> CutRule:
        return cls(pattern, regex.compile(pattern), regex.compile(pattern, flags=regex.REVERSE))

    def core(self, text: str, start: int, end: int, min_core: int) -> tuple[int, int] | None:
        """[a, b): the first and last cut strictly inside ``text[start:end]``; None if
        there is none or ``b - a < min_core``. Lookarounds see ``text[start]`` and
        ``text[end - 1]`` but nothing outside, so both characters of every cut pair lie
        in the chunk."""
        first = self.forward.search(text, start + 1, end)
        if first is None:
            return None
        a = first.start()
        last = self.backward.search(text, a, end)
        b = a if last is None else last.start()
        return (a, b) if b - a >= min_core else None

    def positions(self, text: str) -> list[int]:
        """Every cut of ``text`` (for tests)."""
        return [m.start() for m in self.forward.finditer(text)]


TIKTOKEN_CUTS = CutRule.compile(r"(?<=\p{L})(?=[^\p{L}\p{M}'\p{Cn}])|(?<=\n)(?=[\p{L}\p{Nd}])")


def _literal(char: str) -> str:
    return f"\\U{ord(char):08x}"


def pair_cuts(rules: Iterable[str], forbidden: Iterable[str]) -> CutRule:
    """A rule from ``(?<=X)(?=Y)`` alternatives, minus every two-character string in
    ``forbidden`` (pairs that some added token holds: no cut may fall inside one)."""
    alternatives = "|".join(rules)
    plain = regex.compile(alternatives)
    by_left: dict[str, set[str]] = {}
    for pair in forbidden:  # only the pairs that the alternatives would cut
        if plain.search(pair, 1, 2) is not None:
            by_left.setdefault(pair[0], set()).add(pair[1])
    if not by_left:
        return CutRule.compile(alternatives)
    banned = "|".join(
        f"(?<={_literal(left)})[{''.join(_literal(c) for c in sorted(rights))}]"
        for left, rights in sorted(by_left.items())
    )
    return CutRule.compile(f"(?:{alternatives})(?!{banned})")
