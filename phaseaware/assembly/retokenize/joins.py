"""One tokenizer call for many cut-bounded pieces of a text (``retokenize.windowed``'s encodes).

``joined_starts`` encodes pieces joined by two-character *stand-ins* chosen so
that every seam is a cut pair of the original text (see ``retokenize.windowed``'s soundness
argument: a cut is decided by the two characters at it), then drops the
stand-ins' tokens: the result equals encoding each piece alone. ``encode`` is
the family's one-text encode (``WindowRecipe.encode``).
"""

from __future__ import annotations

import itertools
from collections.abc import Sequence

import numpy as np

from phaseaware.tokenizers.windowing import Encode

__all__ = ["Encode", "joined_starts", "junction_starts", "unique_junction_starts"]


def joined_starts(encode: Encode, pieces: Sequence[str], seams: Sequence[str]) -> list[np.ndarray]:
    """Token starts of each piece (relative) from one encode of ``p0 s0 p1 s1 ... pn``.

    Sound when every seam's two sides are cut pairs and no special token
    crosses a seam: then the joined tokens are each piece's and seam's alone.
    """
    if len(pieces) == 1:
        return [encode(pieces[0]) if pieces[0] else np.zeros(0, dtype=np.int64)]
    joined: list[str] = []
    seg_joined: list[int] = []
    pos = 0
    for n, piece in enumerate(pieces):
        if n:
            joined.append(seams[n - 1])
            pos += len(seams[n - 1])
        seg_joined.append(pos)
        joined.append(piece)
        pos += len(piece)
    found = encode("".join(joined))
    seg_start = np.asarray(seg_joined, dtype=np.int64)
    seg_len = np.asarray([len(p) for p in pieces], dtype=np.int64)
    seg = np.searchsorted(seg_start, found, side="right") - 1
    keep = found < seg_start[seg] + seg_len[seg]
    found, seg = found[keep], seg[keep]
    ends = np.cumsum(np.bincount(seg, minlength=len(pieces))).tolist()
    relative = found - seg_start[seg]
    return [relative[i:j] for i, j in zip([0, *ends[:-1]], ends, strict=True)]


def junction_starts(
    encode: Encode,
    text: str,
    cores: Sequence[tuple[int, int, np.ndarray]],
    *,
    bar_specials: bool,
) -> tuple[list[np.ndarray], list[int]]:
    """Token starts of each junction (the text between cores), in one encode: (starts
    relative to each junction, each junction's start in ``text``).

    Only the cores' ``a`` and ``b`` are read (their starts may be relative).

    The junctions ``J_0 .. J_m`` are joined as ``J_0 S_1 J_1 ... S_m J_m`` with
    ``S_i = T[a_i] + T[b_i - 1]``, core i's first and last characters. Each
    seam pair is then ``(T[a_i - 1], T[a_i])`` or ``(T[b_i - 1], T[b_i])``, an
    original cut pair (an empty junction joins ``T[b_{i-1} - 1]`` to ``T[a_i]``,
    equal to the cut pair at ``b_{i-1} == a_i``): cuts are decided by the two
    characters at them alone, so the joined text's tokens are the junctions' and
    the stand-ins', each tokenized alone. A special-token occurrence crossing a
    seam would hold a whole stand-in (no ``|``: chunks with ``|`` have no core)
    with ``|`` within 20 characters on both sides; where that is possible the
    join is split (that junction is encoded on its own group): ``bar_specials``
    (tiktoken). Where every added token is excluded from the cut pairs
    (``tokenizers.hf_windowed``) no occurrence can cross a seam, and everything is one encode.
    """
    bounds = [0]
    for a, b, _ in cores:
        bounds += [a, b]
    bounds.append(len(text))
    pieces = [text[bounds[2 * i] : bounds[2 * i + 1]] for i in range(len(cores) + 1)]
    out: list[np.ndarray] = []
    group: list[int] = []  # junction indexes joined in the current encode

    def flush() -> None:
        if group:
            seams = [text[bounds[2 * j - 1]] + text[bounds[2 * j] - 1] for j in group[1:]]
            found = joined_starts(encode, [pieces[j] for j in group], seams)
            out.extend(found)
        group.clear()

    recent = ""  # the last 20 characters of the current group's joined text
    for j, piece in enumerate(pieces):
        if bar_specials and group and "|" in recent and "|" in piece[:20]:
            flush()
            recent = ""
        group.append(j)
        recent = (recent + "xx" + piece)[-20:]  # stand-ins hold no "|"
    flush()
    return out, bounds[0::2]


def unique_junction_starts(
    encode: Encode, text: str, cores: Sequence[tuple[int, int, np.ndarray]]
) -> tuple[list[np.ndarray], list[int]]:
    """``junction_starts`` where no added token can cross a seam, each distinct junction
    text encoded once: (starts relative to each junction, each junction's start).

    A junction lies between cuts (or the text's ends), so its tokens are its own
    alone: equal texts have equal tokens. Only the first junction of each text is
    joined, in order, each with its own context: junction ``j`` is followed by
    ``R_j = T[a_j]`` (the next core's first character) and preceded by ``L_j =
    T[b_{j-1} - 1]`` (the previous core's last), so every seam pair is again an
    original cut pair and each stand-in is ``R_r + L_s`` (2 characters). Empty
    junctions have no tokens and are left out.
    """
    bounds = [0]
    for a, b, _ in cores:
        bounds += [a, b]
    bounds.append(len(text))
    pieces = [text[bounds[2 * j] : bounds[2 * j + 1]] for j in range(len(cores) + 1)]
    first: dict[str, int] = {}
    for j, piece in enumerate(pieces):
        if piece:
            first.setdefault(piece, j)
    reps = list(first.values())
    seams = [text[bounds[2 * r + 1]] + text[bounds[2 * s] - 1] for r, s in itertools.pairwise(reps)]
    found = dict(zip(first, joined_starts(encode, [pieces[r] for r in reps], seams), strict=True))
    empty = np.zeros(0, dtype=np.int64)
    found[""] = empty
    return [found[piece] for piece in pieces], bounds[0::2]
