"""Values a server sends, checked before use: token ids, token offsets, and text to show.

A server is untrusted input. ``/tokenize`` ids that are negative, beyond any vocabulary
or booleans (``True`` is an ``int`` to Python) crashed deep in a tokenizer's decode
(``OverflowError``); render-route offsets that were not pairs, or infinite, crashed in
``int()``; llama-server's ``/props`` ``build_info`` reached the terminal and the record
verbatim (ANSI escapes, carriage returns, 15 MB). Here:

* :func:`check_token_ids`: every id an ``int`` (never a ``bool``) in
  ``[0, MAX_TOKEN_ID]``; whether it is in the tokenizer's vocabulary is the decode's
  question (its failure is named, see :func:`decode_server_ids`);
* :func:`offset_pairs`: ``[start, end]`` pairs of ints (never bools) with
  ``0 <= start <= end <= MAX_OFFSET``, one per id, else the reason they are unusable;
* :func:`shown_text`: server text with control characters escaped, cut to
  :data:`SHOWN_CHARS` characters.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from phaseaware.errors import EndpointError

__all__ = [
    "MAX_OFFSET",
    "MAX_TOKEN_ID",
    "SHOWN_CHARS",
    "check_token_count",
    "check_token_ids",
    "decode_server_ids",
    "offset_pairs",
    "shown_text",
]

#: No vocabulary has more ids than this (2^31 - 1: the largest id servers store).
MAX_TOKEN_ID = 2**31 - 1
#: No prompt is longer than this, in characters.
MAX_OFFSET = 2**40
#: The most characters of a server's text shown or recorded.
SHOWN_CHARS = 200


def _is_int(value: object) -> bool:
    return type(value) is int  # a bool is no id, no count, no offset


def _shown_value(value: object) -> str:
    if _is_int(value) and abs(value) > 10**12:  # type: ignore[arg-type]
        return f"an integer of {len(str(value))} digits"
    return shown_text(repr(value), limit=40)


def check_token_ids(values: Sequence[object], *, source: str) -> list[int]:
    """``values`` as token ids, or :class:`EndpointError` naming ``source`` and the first
    value that is no token id (a non-negative ``int`` up to :data:`MAX_TOKEN_ID`)."""
    for i, value in enumerate(values):
        if not (_is_int(value) and 0 <= value <= MAX_TOKEN_ID):  # type: ignore[operator]
            raise EndpointError(
                f"{source} returned {_shown_value(value)} as token {i}, which is no token id "
                f"(an integer in [0, {MAX_TOKEN_ID}]): the server's answer is broken"
            )
    return [int(v) for v in values]  # type: ignore[call-overload]


def check_token_count(value: object, *, source: str) -> int:
    """``value`` (a server's ``usage.prompt_tokens``) as a count, or :class:`EndpointError`
    naming ``source``: an ``int`` (never a ``bool``) in ``[0, MAX_TOKENS]``."""
    from phaseaware.limits import MAX_TOKENS

    if type(value) is int and 0 <= value <= MAX_TOKENS:
        return value
    raise EndpointError(
        f"{source} reports usage.prompt_tokens = {_shown_value(value)}, which is no token "
        f"count (an integer in [0, {MAX_TOKENS}]): the server's answer is broken"
    )


def decode_server_ids(tokenizer: Any, ids: Sequence[int], *, source: str) -> str:
    """``tokenizer.decode(ids)``; an id the tokenizer cannot decode (outside its vocabulary)
    is an :class:`EndpointError` naming ``source``, not a crash inside the tokenizer."""
    try:
        return str(tokenizer.decode(list(ids)))
    except Exception as exc:  # each tokenizer fails its own way (KeyError, OverflowError, ...)
        top = max(ids, default=0)
        raise EndpointError(
            f"{source} returned ids --tokenizer cannot decode (largest {top}; "
            f"{type(exc).__name__}): another tokenizer, or a broken answer; pass the served "
            "model's tokenizer"
        ) from None


def offset_pairs(raw: object, *, count: int) -> tuple[tuple[tuple[int, int], ...] | None, str]:
    """``raw`` as ``count`` ``(start, end)`` character spans, or ``None`` and why not."""
    if raw is None:
        return None, ""
    if not isinstance(raw, list) or len(raw) != count:
        return None, f"token_offsets is not a list of {count} spans"
    pairs = []
    for i, pair in enumerate(raw):
        if not isinstance(pair, list | tuple) or len(pair) != 2:
            return None, f"token_offsets[{i}] is {_shown_value(pair)}, not a [start, end] pair"
        start, end = pair
        if not (_is_int(start) and _is_int(end) and 0 <= start <= end <= MAX_OFFSET):
            return None, f"token_offsets[{i}] is {_shown_value(pair)}, not a character span"
        pairs.append((start, end))
    return tuple(pairs), ""


def _invisible(code: int) -> bool:
    """Line and paragraph separators, zero-width and bidirectional controls, the BOM."""
    return (
        code in (0x2028, 0x2029, 0xFEFF)
        or 0x200B <= code <= 0x200F
        or 0x202A <= code <= 0x202E
        or 0x2066 <= code <= 0x2069
    )


def shown_text(value: str, *, limit: int = SHOWN_CHARS) -> str:
    """``value`` safe to print: control characters (ANSI escapes, CR, LF, C1, bidi
    overrides) escaped as ``\\x..``/``\\u....``, cut to ``limit`` characters (and the
    number left out said)."""
    cut = value[:limit]
    out = []
    for ch in cut:
        code = ord(ch)
        if code < 0x20 or code == 0x7F or 0x80 <= code < 0xA0:
            out.append(f"\\x{code:02x}")
        elif _invisible(code):
            out.append(f"\\u{code:04x}")
        else:
            out.append(ch)
    text = "".join(out)
    if len(value) > limit:
        text += f"... ({len(value) - limit} more characters)"
    return text
