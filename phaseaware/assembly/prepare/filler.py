"""Filler: text whose token count is exact, used to shift later tokens by k.

A *pad block* before a chunk is ``unit * k + "\\n"`` (nothing for k = 0),
inserted between the chunk separator and the chunk text; the *end pad* after
the context is ``"\\n" + unit * k`` (both built by ``render``). The unit is
never whitespace-only (some frameworks strip whitespace) and is qualified per
tokenizer by tokenizing it in real contexts for k = 0..2·period: the tokens it
adds must be exactly ``shift(k) = k·unit_tokens + c`` (one constant ``c`` for
all k ≥ 1) and the tokens of the neighbours must be unchanged. Results are cached per
(tokenizer fingerprint, period) in memory only. ``chunk_pad_tables`` re-measures
the pad table for chunks whose first character could merge with the pad.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from phaseaware.assembly.plan.padding import NO_PAD, PadTable
from phaseaware.assembly.prepare.measure import MeasuredChunk
from phaseaware.assembly.prepare.render import CHUNK_SEPARATOR, end_pad, pad_block
from phaseaware.caches import BoundedCache
from phaseaware.errors import TokenizerError
from phaseaware.tokenizers.base import Tokenizer

__all__ = [
    "FILLER_CANDIDATES",
    "Filler",
    "filler_unit",
    "find_filler",
    "measure_end_pad",
    "chunk_pad_tables",
]

FILLER_CANDIDATES: tuple[str, ...] = (" .", " ·", " -", " ~", " |", "·", " *", " =", " +", " _")
# Starts of chunk text the pad block is tested against (letters, digits, quotes, bullets).
_SAMPLE_NEXT: tuple[str, ...] = ("The report", "1990 was", "(a) first", "“Quoted”", "- item", "é")
_SAMPLE_PREV = "previous chunk ends here." + CHUNK_SEPARATOR

_CACHE_ENTRIES = 256  # (tokenizer, period) pairs; a process sees a handful
_cache: BoundedCache[tuple[str, int], Filler] = BoundedCache(
    max_entries=_CACHE_ENTRIES, name="assembly.filler"
)


@dataclass(frozen=True)
class Filler:
    """A qualified filler unit for one tokenizer and period."""

    unit: str
    unit_tokens: int
    period: int
    chunk_pad: PadTable  # shifts of ``pad_block(unit, k)`` before a chunk


def _insertion_shift(
    tokenizer: Tokenizer,
    before: str,
    pad: str,
    after: str,
    known: tuple[list[int], list[int]] | None = None,
) -> int | None:
    """Tokens added by inserting ``pad`` between ``before`` and ``after``.

    None when the insertion changes the tokens of ``before`` or ``after``.
    ``known``: ``(encode(before + after), encode(before))``, when the caller has them.
    """
    base, alone = known or (tokenizer.encode(before + after), tokenizer.encode(before))
    padded = tokenizer.encode(before + pad + after)
    n_before = len(alone)
    n_after = len(base) - n_before
    if base[:n_before] != alone:
        return None  # ``before`` itself merges with ``after``; cannot judge this context
    if padded[:n_before] != base[:n_before]:
        return None
    if n_after and padded[-n_after:] != base[n_before:]:
        return None
    return len(padded) - len(base)


def _linear_table(measured: Sequence[int | None]) -> PadTable | None:
    """The table of ``measured`` shifts if they are ``k·unit + c`` for k >= 1 (and 0 for k = 0)."""
    shifts = [s for s in measured if s is not None]
    if len(shifts) != len(measured) or shifts[0] != 0:
        return None
    if len(shifts) < 3:
        return PadTable(tuple(shifts))
    unit = shifts[2] - shifts[1]
    if unit < 1:
        return None
    const = shifts[1] - unit
    if any(shifts[k] != k * unit + const for k in range(1, len(shifts))):
        return None
    return PadTable(tuple(shifts))


def _qualify(tokenizer: Tokenizer, unit: str, period: int) -> Filler | None:
    max_k = 2 * period
    table: PadTable | None = None
    alone = tokenizer.encode(_SAMPLE_PREV)
    for nxt in _SAMPLE_NEXT:
        known = (tokenizer.encode(_SAMPLE_PREV + nxt), alone)  # the same for every k
        shifts = [
            _insertion_shift(tokenizer, _SAMPLE_PREV, pad_block(unit, k), nxt, known)
            for k in range(max_k + 1)
        ]
        candidate = _linear_table(shifts)
        if candidate is None or (table is not None and candidate != table):
            return None
        table = candidate
    assert table is not None
    unit_tokens = table.shifts[2] - table.shifts[1] if len(table.shifts) > 2 else 1
    # Every residue must be reachable, or padding cannot steer phases.
    reachable = {s % period for s in table.shifts}
    if len(reachable) != period:
        return None
    return Filler(unit=unit, unit_tokens=unit_tokens, period=period, chunk_pad=table)


def find_filler(tokenizer: Tokenizer, *, period: int) -> Filler:
    """The first candidate unit that qualifies for ``tokenizer`` (cached).

    Raises ``TokenizerError`` naming the tokenizer when no candidate qualifies.
    """
    if period < 1:
        raise ValueError(f"period must be >= 1, got {period}")
    key = (tokenizer.fingerprint(), period)
    cached = _cache.get(key)
    if cached is not None:
        return cached
    for unit in FILLER_CANDIDATES:
        filler = _qualify(tokenizer, unit, period)
        if filler is not None:
            _cache.put(key, filler)
            return filler
    raise TokenizerError(
        f"no filler unit has an exact token count with tokenizer {tokenizer.spec!r} "
        f"(tried {', '.join(repr(u) for u in FILLER_CANDIDATES)}); "
        "assemble with options pad=False and repeat only"
    )


def measure_end_pad(
    tokenizer: Tokenizer, *, unit: str, period: int, context_tail: str, suffix: str, max_k: int
) -> PadTable | None:
    """Tokens added by ``end_pad(k)`` between ``context_tail`` and ``suffix``, k = 0..max_k.

    The suffix may merge with the pad's last unit (``" .\n\n"``), so only the
    total count is tabulated; assembly re-measures the real prompt length and
    re-plans until the end pad is a fixed point. None if some residue mod
    ``period`` cannot be reached.
    """
    base = len(tokenizer.encode(context_tail + suffix))
    shifts = tuple(
        len(tokenizer.encode(context_tail + end_pad(unit, k) + suffix)) - base
        for k in range(max_k + 1)
    )
    if len({s % period for s in shifts}) != period:
        return None
    return PadTable(shifts)


def chunk_pad_tables(
    tokenizer: Tokenizer, filler: Filler | None, prepared: Sequence[MeasuredChunk]
) -> tuple[PadTable, ...]:
    """The filler's pad table, re-measured for chunks whose first char could merge with it.

    A chunk starting with whitespace or punctuation (``"\\n\\nText"``) may merge
    with the pad's last token; its table is measured on its own first 48 chars.
    When that table cannot reach every residue, the chunk is never padded.
    """
    if filler is None:
        return tuple(NO_PAD for _ in prepared)
    out = []
    for prep in prepared:
        text = prep.chunk.text
        if prep.empty or text[:1].isalnum():
            out.append(filler.chunk_pad)
            continue
        head = CHUNK_SEPARATOR + text[:48]
        base = len(tokenizer.encode(head))
        shifts = tuple(
            len(tokenizer.encode(CHUNK_SEPARATOR + pad_block(filler.unit, k) + text[:48])) - base
            for k in range(len(filler.chunk_pad.shifts))
        )
        reachable = {x % filler.period for x in shifts}
        ok = len(reachable) == filler.period and all(x >= 0 for x in shifts)
        out.append(PadTable(shifts) if ok else NO_PAD)
    return tuple(out)


def filler_unit(tokenizer: Tokenizer, *, period: int, default: str) -> str:
    """The unit of :func:`find_filler`, else ``default``: for callers that re-tokenize
    every text they build and need only some repeatable text (endpoint probes).
    GPT-2-style pre-tokenizers (SmolLM2's) have no filler: a separator's newlines
    tokenize differently before a pad than before text."""
    try:
        return find_filler(tokenizer, period=period).unit
    except TokenizerError:
        return default
