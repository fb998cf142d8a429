"""Token starts of a long text stitched from cached chunk tokenizations, proven equal.

``stitched_starts`` returns exactly ``tokenizer.char_index(text).starts``; the
chunk texts inside ``text`` are tokenized once (``ChunkTokenCache``) and only the
short *junctions* between them are encoded on each call. Every result is an
exact tokenization, never an estimate: where the argument below does not hold
(a tokenizer other than tiktoken's cl100k/o200k patterns), the whole text is
encoded (``verification == "full"``).

Soundness (tiktoken, ``CL100K_PATTERN`` and ``O200K_PATTERN``). tiktoken splits
the text at special-token occurrences, splits each ordinary stretch with its
pre-tokenizer regex into pieces (leftmost-first, contiguous: the alternatives
cover every character), and byte-pair merges inside each piece only. So the
tokens of ``T`` are the tokens of ``T[:p]`` followed by those of ``T[p:]``
whenever ``p`` is a piece boundary of ``T`` that (a) no special-token string
spans, and (b) splits the same way when the text ends (or starts) there. We
call such ``p`` a *cut*; two kinds are used, both decided by ``T[p-1]`` and
``T[p]`` alone:

1. ``T[p-1]`` is a letter (``\\p{L}``) and ``T[p]`` is not a letter, mark,
   ``'`` or unassigned. The piece holding ``T[p-1]`` is a letter piece (or
   cl100k's ``'s``-style contraction); every letter alternative consumes only
   letters and marks after its optional one-character prefix, and o200k's
   contraction suffix must start with ``'``, so that piece ends at ``p``. No
   alternative has a look-behind, so the pieces from ``p`` on depend on
   ``T[p:]`` only. The pieces before ``p`` read at most one character past
   their end (``\\p{L}++`` and the optional contraction look at ``T[p]``, a
   non-letter, non-``'``), which they treat as they treat the end of text.
2. ``T[p-1] == "\\n"`` and ``T[p]`` is a letter or decimal digit. No
   alternative continues a piece from a newline into a letter or digit (the
   letter alternatives' prefix excludes ``\\r\\n``; punctuation's trailing
   ``[\\r\\n]*`` / ``[\\r\\n/]*`` and the whitespace alternatives stop there).
   The whitespace run ending at ``p - 1`` ends in a newline, so
   ``\\s*[\\r\\n]`` (``\\s*[\\r\\n]+``) takes all of it followed by a letter as
   it does at the end of text, where cl100k's ``\\s++$`` takes the same run.

(a): every special token of the supported encodings is ``<|name|>`` with no
``|`` in ``name`` and ``len(name) < 16`` (checked per encoding), and only a
chunk without ``|`` gets a core, of at least 16 characters. An occurrence
meeting a core then either holds one of its ``|`` inside the chunk (there is
none), or lies inside the chunk's core (its ``name`` would hold the whole
core: too short), or has ``<`` or ``>`` next to a cut, whose sides are a
letter or newline. Occurrences in the junctions (the chat template's) are
found there exactly as in the whole text: none crosses a core edge. A chunk's *core* runs from its first cut to its last one, both
inside the chunk text, so it is a cut-bounded stretch of every prompt that
holds the chunk: its tokens, offset by its position, are the prompt's tokens
there. The junctions (the text between cores: chunk edges, separators, pads,
template) are encoded whole on every call. Windows are thus whole
pre-tokenizer pieces, W = the distance from a chunk's edge to its first cut
(typically one word). The property test
``tests/unit/assembly/test_stitch_properties.py`` checks ``stitched == full`` on
adversarial boundaries (whitespace runs, combining marks, ZWJ emoji, digit
runs, CJK, contractions).

Byte-level Hugging Face tokenizers: DeepSeek-V4's ``tokenizer.json`` config
(three split regexes, no normalizer, added tokens) has its own cut rule and
argument in ``phaseaware.tokenizers.hf_windowed``; there no chunk needs to avoid ``|`` and the
junctions are one encode. Any other configuration is encoded in full and
says why (``windowed_support``). Cuts are found by ``cuts.CutRule``: a chunk's
first and last cut are one forward and one backward regex search.

Heads and tails (Hugging Face families). ``measure`` encodes each chunk as
``SEP c SEP``; where ``(SEP[-1], c[0])`` is a cut pair, the tokens of ``c``
before its first cut are those of that head alone (both ends are cuts), and
likewise the tail after its last cut (``seed_cores`` keeps them). A prompt
whose pair at the chunk's start (end) is a cut too then takes the head (tail)
from the cache: the core runs to the chunk's edge, and its junction shrinks
to the separator and pads. Equal junction texts have equal tokens (each lies
between cuts), so each distinct one is encoded once
(``joined.unique_junction_starts``).
"""

from __future__ import annotations

import itertools
from collections.abc import Sequence
from typing import cast

import numpy as np

from phaseaware.assembly.retokenize.cache import (
    DEFAULT_CACHE_BYTES,
    CacheEntry,
    ChunkTokenCache,
    default_cache,
)
from phaseaware.assembly.retokenize.joins import (
    joined_starts,
    junction_starts,
    unique_junction_starts,
)
from phaseaware.caches import BoundedCache
from phaseaware.tokenizers.base import BatchTokenizer, CharIndexTokenizer, Tokenizer, implements
from phaseaware.tokenizers.offsets import TokenStarts
from phaseaware.tokenizers.windowing import (
    MIN_CORE,
    NOT_WINDOWED,
    StartsBatchTokenizer,
    WindowedTokenizer,
    WindowRecipe,
)

__all__ = [
    "DEFAULT_CACHE_BYTES",
    "ChunkTokenCache",
    "TokenStarts",
    "default_cache",
    "windowed_support",
    "stitched_starts",
    "cached_pieces",
    "seed_cores",
    "full_starts",
]

# tiktoken: when new chunks make up at least this share of a text, it is encoded whole
# once and their cores read off it (``_entry_from``); else cores and junctions apart
FULL_ENCODE_SHARE = 0.5


def windowed_support(tokenizer: Tokenizer) -> str | None:
    """None when ``stitched_starts`` is sound for ``tokenizer``; else why it is not.

    Soundness is a tokenizer capability (:class:`~phaseaware.tokenizers.windowing.
    WindowedTokenizer`): the adapter declares its cut rule, or is encoded in full."""
    return _decided(tokenizer)[1]


def _family(tokenizer: Tokenizer) -> WindowRecipe | None:
    """The stitching recipe of ``tokenizer``; None where ``windowed_support`` names a reason."""
    return _decided(tokenizer)[0]


# each tokenizer object's capability, decided once (a runtime protocol check reads every
# member's name, ~5-15 us, asked several times per assemble). The entry holds the tokenizer
# itself, so its id is not reused while the entry lives (objects without weak references
# too; a recipe's encode holds its tokenizer anyway); least recently used evicted past 64
_DECIDED: BoundedCache[int, tuple[Tokenizer, WindowRecipe | None, str | None]] = BoundedCache(
    max_entries=64, name="assembly.windowed_capabilities"
)


def _decided(tokenizer: Tokenizer) -> tuple[WindowRecipe | None, str | None]:
    """``(recipe, why not)`` of ``tokenizer``, decided once per object."""
    known = _DECIDED.get(id(tokenizer))
    if known is not None and known[0] is tokenizer:
        return known[1], known[2]
    if isinstance(tokenizer, WindowedTokenizer):
        recipe, why = tokenizer.window_recipe(), tokenizer.window_support()
    else:
        recipe, why = None, NOT_WINDOWED
    _DECIDED.put(id(tokenizer), (tokenizer, recipe, why))
    return recipe, why


def cached_pieces(
    tokenizer: BatchTokenizer,
    texts: Sequence[str],
    cache: ChunkTokenCache,
    *,
    fingerprint: str,
    chunks: Sequence[str] | None = None,
    offset: int = 0,
) -> list[TokenStarts]:
    """``tokenize_batch(texts)`` as token starts, each text's looked up in ``cache`` first.

    With ``chunks`` (``texts[k]`` holds ``chunks[k]`` at ``offset``), the fresh
    encodes also cache the chunks' cores (``seed_cores``) for ``stitched_starts``.
    """
    fp = fingerprint + "/piece"
    entries = [cache.get((fp, t)) for t in texts]
    missing = [k for k, e in enumerate(entries) if e is None]
    if missing:
        batch = [texts[k] for k in missing]
        if implements(tokenizer, StartsBatchTokenizer):
            fresh = cast(StartsBatchTokenizer, tokenizer).token_starts_batch(batch)
        else:
            fresh = [np.asarray(p.starts, dtype=np.int64) for p in tokenizer.tokenize_batch(batch)]
        for k, piece in zip(missing, fresh, strict=True):
            entry = CacheEntry(0, 0, piece)
            cache.put((fp, texts[k]), entry)
            entries[k] = entry
        if chunks is not None and implements(tokenizer, Tokenizer):
            seed_cores(
                cast(Tokenizer, tokenizer),
                batch,
                [chunks[k] for k in missing],
                fresh,
                offset,
                cache,
            )
    out = []
    for text, got in zip(texts, entries, strict=True):
        assert got is not None and got.starts is not None
        out.append(TokenStarts(starts=got.starts, text_length=len(text), verification="full"))
    return out


def full_starts(tokenizer: Tokenizer, text: str) -> TokenStarts:
    """One encode of ``text`` (``verification="full"``)."""
    if isinstance(tokenizer, CharIndexTokenizer):
        starts = np.asarray(tokenizer.char_index(text).starts, dtype=np.int64)
    else:
        starts = np.asarray(tokenizer.tokenize(text).starts, dtype=np.int64)
    return TokenStarts(starts=starts, text_length=len(text), verification="full")


def _entries(family: WindowRecipe, chunks: Sequence[str]) -> list[CacheEntry]:
    """Each chunk's ``CacheEntry``; the cores are encoded in one call, joined by stand-ins.

    Between cores i and i + 1 stands ``chunk_i[b_i] + chunk_{i+1}[a_{i+1} - 1]``,
    so each seam is an original cut pair; for tiktoken no core or stand-in holds
    ``|`` (see ``joined.junction_starts``), so no special token occurs in the
    joined text; for DeepSeek-V4 see ``phaseaware.tokenizers.hf_windowed`` (joins).
    """
    found = [_core(family, c) for c in chunks]
    cored = [(c, ab) for c, ab in zip(chunks, found, strict=True) if ab is not None]
    pieces = [c[a:b] for c, (a, b) in cored]
    seams = [c0[b0] + c1[a1 - 1] for (c0, (_, b0)), (c1, (a1, _)) in itertools.pairwise(cored)]
    encoded = iter(joined_starts(family.encode, pieces, seams) if pieces else [])
    return [
        CacheEntry(ab[0], ab[1], next(encoded) + ab[0])
        if ab is not None
        else CacheEntry(0, 0, None)
        for ab in found
    ]


def _entry_from(family: WindowRecipe, chunk: str, start: int, starts: np.ndarray) -> CacheEntry:
    """``chunk``'s entry read off the token ``starts`` of a text holding it at ``start``.

    Both characters of each of the chunk's cuts lie in the chunk, so they are cuts
    of that text too: the tokens starting inside the core are the core's own, the
    same entry ``_entries`` encodes (``tests/unit/assembly/test_stitch_measure.py``).
    """
    ab = _core(family, chunk)
    if ab is None:
        return CacheEntry(0, 0, None)
    lo, hi = np.searchsorted(starts, [start + ab[0], start + ab[1]]).tolist()
    return CacheEntry(ab[0], ab[1], starts[lo:hi] - start)


def _core(family: WindowRecipe, text: str) -> tuple[int, int] | None:
    """[a, b) of ``text``'s first and last cut strictly inside it; None if too short."""
    if family.bar_specials and "|" in text:
        return None
    return family.cuts.core(text, 0, len(text), MIN_CORE)


def seed_cores(
    tokenizer: Tokenizer,
    texts: Sequence[str],
    chunks: Sequence[str],
    pieces: Sequence[np.ndarray],
    offset: int,
    cache: ChunkTokenCache,
) -> None:
    """Cache each chunk's core from a full encode of a text holding it at ``offset``.

    ``pieces[k]`` are the token starts of ``texts[k]``, which holds ``chunks[k]``
    at ``[offset, offset + len)``. The chunk's cuts are cuts there too (both
    characters of each lie in the chunk), so the tokens starting inside the
    core are the core's own: the same entry ``_entries`` would encode. Where the
    chunk's first (last) character also makes a cut pair with the text's
    character before (after) it, the tokens of the head ``[0, a)`` (tail
    ``[b, len)``) are those of that stretch alone, and are kept for
    ``stitched_starts`` to use wherever the prompt has a cut there too
    (Hugging Face families only).
    """
    family = _family(tokenizer)
    if family is None:
        return
    fp = tokenizer.fingerprint()
    at_cut = family.cuts.at
    for text, chunk, starts in zip(texts, chunks, pieces, strict=True):
        key = (fp, chunk)
        if cache.peek(key):
            continue
        ab = _core(family, chunk)
        if ab is None:
            cache.put(key, CacheEntry(0, 0, None))
            continue
        end = offset + len(chunk)
        bounds = [offset, offset + ab[0], offset + ab[1], end]
        lo, a, b, hi = np.searchsorted(starts, bounds).tolist()
        head_ok = not family.bar_specials and at_cut(text, offset)
        tail_ok = not family.bar_specials and at_cut(text, end)
        if head_ok or tail_ok:
            whole = starts[lo:hi] - offset
            entry = CacheEntry(*ab, whole[a - lo : b - lo], whole, a - lo, b - lo, head_ok, tail_ok)
        else:
            entry = CacheEntry(ab[0], ab[1], starts[a:b] - offset)
        cache.put(key, entry)


def stitched_starts(
    tokenizer: Tokenizer,
    text: str,
    spans: Sequence[tuple[int, int]],
    *,
    cache: ChunkTokenCache | None,
) -> TokenStarts:
    """``char_index(text).starts``, with the chunk texts at ``spans`` (ascending) cached.

    Falls back to one full encode when ``windowed_support`` names a reason or
    ``cache`` is None.
    """
    family = None if cache is None else _family(tokenizer)
    if cache is None or family is None:
        return full_starts(tokenizer, text)
    fp = tokenizer.fingerprint()
    keys = [(fp, text[start:end]) for start, end in spans]
    entries: list[CacheEntry | None] = []
    missing: dict[tuple[str, str], int] = {}  # new keys -> first index; repeats look up after
    for n, key in enumerate(keys):
        entries.append(None if key in missing else cache.get(key))
        if entries[-1] is None:
            missing.setdefault(key, n)
    if family.bar_specials and sum(len(k[1]) for k in missing) >= FULL_ENCODE_SHARE * len(text):
        # mostly new chunks (a cold cache): one encode of the whole text is cheaper than
        # encoding the cores and the junctions apart; the cores are read off it
        full = full_starts(tokenizer, text)
        for key, n in missing.items():
            cache.put(key, _entry_from(family, key[1], spans[n][0], full.starts))
        return full
    fresh = dict(zip(missing, _entries(family, [k[1] for k in missing]), strict=True))
    for key, entry in fresh.items():
        cache.put(key, entry)
        entries[missing[key]] = entry
    for n, key in enumerate(keys):
        if entries[n] is None:  # a repeat (counted as a hit); the entry if the cap dropped it
            entries[n] = cache.get(key) or fresh[key]
    cores: list[tuple[int, int, np.ndarray]] = []  # (a, b, starts relative to the chunk)
    chunk_at: list[int] = []
    at_cut = family.cuts.at
    for (start, end), got in zip(spans, entries, strict=True):
        assert got is not None
        if got.starts is None:
            continue
        a, b, core = start + got.a, start + got.b, got.starts
        if got.whole is not None:
            i, j = got.i_a, got.i_b
            if got.head_ok and at_cut(text, start):  # the prompt cuts at the chunk start
                a, i = start, 0
            if got.tail_ok and at_cut(text, end):  # ... and at its end
                b, j = end, got.whole.size
            core = got.whole[i:j]
        cores.append((a, b, core))
        chunk_at.append(start)
    encode = cache.remembering(family.encode, fp)  # junctions repeat when chunks do
    if family.bar_specials:
        junctions, junction_at = junction_starts(encode, text, cores, bar_specials=True)
    else:
        junctions, junction_at = unique_junction_starts(encode, text, cores)
    parts: list[np.ndarray] = []
    at: list[int] = []
    for (_, _, core), start, junction, j_at in zip(
        cores, chunk_at, junctions, junction_at, strict=False
    ):
        parts += [junction, core]
        at += [j_at, start]
    parts.append(junctions[-1])
    at.append(junction_at[-1])
    starts = np.concatenate(parts)  # relative to each part's own base, then shifted at once
    starts += np.repeat(np.asarray(at, dtype=np.int64), [p.size for p in parts])
    return TokenStarts(starts=starts, text_length=len(text), verification="windowed")
