"""What a server renders when a request names no chat settings, and why renders differ.

Every request phaseaware builds states its settings (:mod:`phaseaware.endpoints.settings`),
but other clients of the same server may not, and a probe must tell a thinking or
reasoning-effort difference from an offset. Three pure-ish helpers for
:mod:`phaseaware.endpoints.probe`:

* :func:`compare_tokens`: the offset when the server's ids end with phaseaware's, else
  :class:`TemplateMismatchError` with the first differing token and
* :func:`likely_cause`: names the probable cause of a token mismatch (thinking or
  effort preamble, tool schemas, tokenizer class, template) and the flag that fixes it.
* :func:`discover_default`: compares the server's ``/tokenize`` of a request that
  names no settings with phaseaware's renders thinking off and on; the result goes
  into the endpoint record (``server_default``).
* :func:`thinking_distinguished`: count mode's check. ``<think>`` and ``</think>``
  are one token each, so a count cannot see which one the server wrote; a pair of
  requests that differ only in the thinking setting shows whether the server renders
  them as phaseaware does (same count difference) or cannot be told apart.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import Any

from phaseaware.errors import EndpointError
from phaseaware.tokenizers.base import Tokenizer

__all__ = [
    "TemplateMismatchError",
    "compare_tokens",
    "discover_default",
    "likely_cause",
    "thinking_distinguished",
]

_THINK_MARKERS = ("<think>", "</think>")


class TemplateMismatchError(EndpointError):
    """No constant offset explains what the server tokenized (other tokenizer or template)."""


def likely_cause(
    tokenizer: Tokenizer, server: Sequence[int], local: Sequence[int], *, thinking: bool
) -> str:
    """A sentence naming the probable cause of ``server != local`` and its fix."""
    server_text = tokenizer.decode(list(server))
    local_text = tokenizer.decode(list(local))
    flip = "--no-thinking" if thinking else "--thinking"
    if "Reasoning Effort" in server_text and "Reasoning Effort" not in local_text:
        return (
            "likely cause: the server writes a reasoning-effort preamble (thinking on with an "
            "effort) that phaseaware's render lacks; state the settings (phaseaware's requests "
            f"send chat_template_kwargs) or probe with {flip}"
        )
    if any(m in server_text for m in _THINK_MARKERS) and (
        [m for m in _THINK_MARKERS if m in server_text]
        != [m for m in _THINK_MARKERS if m in local_text]
    ):
        return f"likely cause: thinking on/off differs from the server's; probe with {flip}"
    if ("tool" in server_text.lower()) != ("tool" in local_text.lower()):
        return (
            "likely cause: tool schemas: the server renders the request's tools and "
            "phaseaware's render does not (or the reverse); pass the same tools to both"
        )
    if server_text == local_text:
        return (
            "likely cause: the tokenizer class: the same text splits into other tokens on the "
            "server (check tokenizer_config.json's tokenizer_class); pass --tokenizer with the "
            "server's tokenizer files"
        )
    return (
        "likely cause: another chat template: pick the matching --chat-format (or hf with the "
        "server's tokenizer folder)"
    )


def discover_default(
    server_ids: Sequence[int],
    renders: Sequence[tuple[Mapping[str, Any], Sequence[int]]],
    *,
    offset: int,
) -> dict[str, Any]:
    """``server_default`` from the server's ids of a request naming no settings.

    ``renders`` pairs chat settings (``{"thinking": ..., "reasoning_effort": ...}``)
    with phaseaware's ids for them, thinking off first. The first whose ids the
    server's end with, after the probed ``offset``, is the default (its settings and
    ``matched: True``); none: ``extra_tokens`` is how many more tokens the server
    wrote than phaseaware's thinking-off render.
    """
    for settings, ids in renders:
        extra = len(server_ids) - len(ids)
        if extra == offset and list(server_ids[extra:]) == list(ids):
            return {**settings, "matched": True}
    missing = len(server_ids) - len(renders[0][1]) - offset if renders else None
    return {
        "thinking": None,
        "matched": False,
        "extra_tokens": missing,
        "note": (
            "a request that names no chat settings renders differently from every setting "
            "phaseaware can render (vLLM's DeepSeek encoders default to thinking with "
            "reasoning effort 'high', a preamble); phaseaware's requests state their "
            "settings, other clients of this server should too"
        ),
    }


def thinking_distinguished(
    *,
    count: Callable[[bool], int],
    local_lengths: dict[bool, int],
    texts_differ: bool,
    thinking: bool,
    offsets: Sequence[int] = (0,),
) -> tuple[bool, str | None]:
    """(``True``, None) when count mode can trust its offset; (``False``, why) when the
    server renders thinking differently (a mismatch); (``True``, why) when a count cannot
    tell.

    ``count(t)`` sends the probe with thinking ``t`` stated and returns the server's
    count; ``local_lengths[t]`` is phaseaware's length for it. Renders that are the
    same text need no check. Otherwise the server's count difference must equal
    phaseaware's; when both renders have the same length (``<think>`` vs ``</think>``),
    a count cannot tell whether the server honoured the setting. A varying endpoint's
    observed ``offsets`` may account for a difference between the two counts.
    """
    if not texts_differ:
        return True, None
    main, other = count(thinking), count(not thinking)
    want = local_lengths[not thinking] - local_lengths[thinking]
    got = other - main
    if got - want not in {a - b for a in offsets for b in offsets}:
        return False, (
            f"with thinking {'off' if thinking else 'on'} the server counts {got:+d} tokens "
            f"relative to thinking {'on' if thinking else 'off'}, phaseaware renders {want:+d}: "
            "the server renders thinking or reasoning effort differently (a reasoning-effort "
            "preamble?); use --mode exact on a server with /tokenize"
        )
    if want == 0:
        return True, (
            "thinking on and off render to the same number of tokens (<think> and </think> "
            "are one token each) and the server counts them alike, so a count cannot tell "
            "whether it honours the setting; use --mode exact on a server with /tokenize"
        )
    return True, None


def _piece(tokenizer: Tokenizer, ids: Sequence[int], j: int) -> str:
    return f"id {ids[j]} {tokenizer.decode([ids[j]])!r}" if j < len(ids) else "(end)"


def compare_tokens(
    server: Sequence[int],
    local: Sequence[int],
    tokenizer: Tokenizer,
    *,
    url: str,
    thinking: bool = False,
) -> int:
    """The offset when ``server`` ends with ``local``; else ``TemplateMismatchError`` naming
    the first differing token (at the alignment that agrees longest)."""
    extra = len(server) - len(local)
    if extra >= 0 and list(server[extra:]) == list(local):
        return extra
    best = (-1, 0)
    for shift in sorted({0, max(0, extra)}):
        j = 0
        while j < len(local) and shift + j < len(server) and server[shift + j] == local[j]:
            j += 1
        best = max(best, (j, shift))
    j, shift = best
    raise TemplateMismatchError(
        f"/tokenize of {url} differs from phaseaware's rendering at token {j} of phaseaware's "
        f"prompt (server token {shift + j}): the server has {_piece(tokenizer, server, shift + j)}"
        f", phaseaware has {_piece(tokenizer, local, j)}; "
        + likely_cause(tokenizer, server, local, thinking=thinking)
    )
