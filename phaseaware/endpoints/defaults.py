"""What a server renders when a request names no chat settings, and why renders differ.

Every request phaseaware builds states its settings (:mod:`phaseaware.endpoints.request_settings`),
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
* :data:`SERVER_DEFAULTS` / :func:`server_default_for`: the defaults table, what each
  known server renders for a DeepSeek-V4/V4.1 request naming no settings, the request
  fields it reads, and where it returns token ids (see :class:`ServerDefault`).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from phaseaware.errors import EndpointError
from phaseaware.tokenizers.base import Tokenizer

__all__ = [
    "SERVER_DEFAULTS",
    "ServerDefault",
    "server_default_for",
    "TemplateMismatchError",
    "compare_tokens",
    "discover_default",
    "likely_cause",
    "thinking_distinguished",
]

_THINK_MARKERS = ("<think>", "</think>")


@dataclass(frozen=True)
class ServerDefault:
    """What one server renders for a request of ``chat_format`` that names no chat settings,
    and how a request changes it. ``thinking``/``reasoning_effort``: the default render;
    ``switches``: what turns thinking on or off besides the request; ``request_fields``:
    the fields the server reads (name -> what it does); ``prompt_ids_field``: the request
    field that returns the prompt's token ids; ``ids_routes``: where the server shows the
    ids of a chat request before generating; ``effort_budgets``: the V4.1 effort table;
    ``source``: the server code it was read from."""

    server: str
    chat_format: str
    thinking: bool
    reasoning_effort: str | None
    switches: str
    request_fields: Mapping[str, str]
    prompt_ids_field: str
    ids_routes: tuple[str, ...]
    source: str
    effort_budgets: str | None = None


_VLLM_FIELDS = {
    "chat_template_kwargs.thinking / .enable_thinking": "thinking on or off (either true: on)",
    "chat_template_kwargs.reasoning_effort": (
        "any value; V4 maps minimal/low/medium -> low, max -> max, none -> chat mode, "
        "anything else -> high; V4.1 takes low/high/xhigh/max/none or 1-100, else HTTP 400"
    ),
    "reasoning_effort": (
        "none/minimal/low/medium/high/xhigh/max; replaces the kwargs' effort and, unless "
        "the kwargs name enable_thinking, sets enable_thinking = (effort != none)"
    ),
    "chat_template_kwargs.drop_thinking": "keep (false) or drop (true, default) old reasoning",
    "return_token_ids": "the response carries prompt_token_ids",
}
_SGLANG_FIELDS = {
    "chat_template_kwargs.thinking": "thinking on (true) for this request",
    "reasoning_effort": (
        "none/minimal/low/medium/high/xhigh/ultra/max or a float 0-0.99; "
        "chat_template_kwargs.reasoning_effort replaces it (any value: V4.1 integer budgets "
        "travel so); a top-level value other than none turns thinking on unless the kwargs "
        "name it; deepseek-recipe maps minimal/low -> low, medium/high/xhigh -> high, "
        "ultra/max -> max; V4 refuses numbers (HTTP 400)"
    ),
    "return_prompt_token_ids": "the first choice carries prompt_token_ids (not streaming)",
}
_VLLM_ROUTES = ("/v1/chat/completions/render (--enable-scale-out)", "/tokenize")

#: The defaults table, by (server, chat format).
SERVER_DEFAULTS: dict[tuple[str, str], ServerDefault] = {
    ("vllm", "deepseek-v4"): ServerDefault(
        server="vllm", chat_format="deepseek-v4", thinking=True, reasoning_effort="high",
        switches="none (the request decides)", request_fields=_VLLM_FIELDS,
        prompt_ids_field="return_token_ids", ids_routes=_VLLM_ROUTES,
        source="vllm 0.32: vllm/tokenizers/deepseek_v4.py (apply_chat_template), "
        "vllm/entrypoints/openai/chat_completion/protocol.py (build_chat_params)",
    ),
    ("vllm", "deepseek-v4.1"): ServerDefault(
        server="vllm", chat_format="deepseek-v4.1", thinking=True, reasoning_effort="high",
        switches="none (the request decides)", request_fields=_VLLM_FIELDS,
        prompt_ids_field="return_token_ids", ids_routes=_VLLM_ROUTES,
        source="vllm 0.32: vllm/tokenizers/deepseek_v41.py (apply_chat_template), "
        "deepseek_v41_encoding.py (REASONING_EFFORT_MAPPINGS)",
        effort_budgets="low50-high75",
    ),
    ("sglang", "deepseek-v4"): ServerDefault(
        server="sglang", chat_format="deepseek-v4", thinking=False, reasoning_effort=None,
        switches="SGLANG_DEFAULT_THINKING=1 turns the default on; SGLANG_DSV4_REASONING_EFFORT "
        "sets the default effort",
        request_fields=_SGLANG_FIELDS, prompt_ids_field="return_prompt_token_ids",
        ids_routes=(),  # /tokenize refuses add_generation_prompt for dsv4: ids come back with the reply
        source="sglang 0.5.23: srt/entrypoints/openai/serving_chat.py (_thinking_requested), "
        "serving_deepseek_recipe.py (_encode), parser/deepseek_recipe_renderer.py; deepseek-recipe",
    ),
    ("sglang", "deepseek-v4.1"): ServerDefault(
        server="sglang", chat_format="deepseek-v4.1", thinking=False, reasoning_effort=None,
        switches="SGLANG_DEFAULT_THINKING=1 turns the default on; "
        "SGLANG_DSV41_REASONING_EFFORT sets the default effort",
        request_fields=_SGLANG_FIELDS, prompt_ids_field="return_prompt_token_ids",
        ids_routes=(),
        source="sglang 0.5.23: serving_deepseek_recipe.py (_encode), deepseek-recipe's V4.1 "
        "table (50/75/100; SGLang's earlier encoding_dsv41.py wrote low25-high50, issue 39909)",
        effort_budgets="low50-high75",
    ),
}  # fmt: skip


def server_default_for(server: str, chat_format: str) -> ServerDefault | None:
    """The table's row for ``server`` (``vllm``, ``sglang``) and ``chat_format``; ``None``
    when the table has none (probe the endpoint: ``server_default`` in its record)."""
    return SERVER_DEFAULTS.get((server.lower(), chat_format))


class TemplateMismatchError(EndpointError):
    """No constant offset explains what the server tokenized (other tokenizer or template)."""


def likely_cause(
    tokenizer: Tokenizer, server: Sequence[int], local: Sequence[int], *, thinking: bool
) -> str:
    """A sentence naming the probable cause of ``server != local`` and its fix."""
    server_text = _decoded(tokenizer, server)
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


def _decoded(tokenizer: Tokenizer, ids: Sequence[int]) -> str:
    """The server's ids as text; ``""`` for ids the tokenizer cannot decode (outside its
    vocabulary: the message then names the id alone)."""
    try:
        return tokenizer.decode(list(ids))
    except Exception:  # each tokenizer fails its own way (KeyError, OverflowError, ...)
        return ""


def _piece(tokenizer: Tokenizer, ids: Sequence[int], j: int) -> str:
    if j >= len(ids):
        return "(end)"
    text = _decoded(tokenizer, [ids[j]])
    return f"id {ids[j]} {text!r}" if text else f"id {ids[j]}"


def compare_tokens(
    server: Sequence[int],
    local: Sequence[int],
    tokenizer: Tokenizer,
    *,
    url: str,
    thinking: bool = False,
    source: str = "/tokenize",
) -> int:
    """The offset when ``server`` ends with ``local``; else ``TemplateMismatchError`` naming
    the first differing token (at the alignment that agrees longest). ``source`` names the
    route the server's ids came from (``/tokenize`` or the render endpoint)."""
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
        f"{source} of {url} differs from phaseaware's rendering at token {j} of phaseaware's "
        f"prompt (server token {shift + j}): the server has {_piece(tokenizer, server, shift + j)}"
        f", phaseaware has {_piece(tokenizer, local, j)}; "
        + likely_cause(tokenizer, server, local, thinking=thinking)
    )
