"""Exact mode's server ids: vLLM's render endpoint where enabled, else ``/tokenize``.

:func:`server_ids` asks :func:`phaseaware.endpoints.render_route.render_ids` first (token
offsets checked once, :func:`~phaseaware.endpoints.render_route.check_offsets`) and
falls back to the probe's ``/tokenize`` call for good once the route is absent or
disabled; :class:`IdsRoute` remembers which answered and why (the record's
``ids_route`` / ``ids_note``). On those ids: :func:`effort_table_of` finds the
DeepSeek-V4.1 effort table a server uses (its budgets are one token each: only ids
tell tables apart), :func:`server_default_of` what a request naming no settings gets.
"""

from __future__ import annotations

import warnings
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from phaseaware.chat import ChatSettings, ChatSettingsError
from phaseaware.endpoints.defaults import discover_default
from phaseaware.endpoints.prompts import EFFORTS, ProbePrompt, probe_prompts
from phaseaware.endpoints.record import redact_url
from phaseaware.endpoints.render_route import RenderUnavailable, check_offsets, render_ids
from phaseaware.errors import PhaseawareWarning
from phaseaware.tokenizers.base import Tokenizer

if TYPE_CHECKING:  # pragma: no cover
    import openai

__all__ = ["IdsRoute", "effort_table_of", "server_default_of", "server_ids"]


@dataclass
class IdsRoute:
    """Where exact mode reads the server's ids: the render endpoint while it answers, then
    ``tokenize`` (the probe's ``/tokenize`` call: prompt, chat_template_kwargs -> ids)."""

    tokenize: Callable[[ProbePrompt, dict[str, Any] | None], list[int]]
    render: bool = True
    name: str | None = None  # "render" or "tokenize", once ids came back
    note: str | None = None
    failed: int = 0  # render requests that found no route (counted in the record's probes)

    @property
    def label(self) -> str:
        """Where the server's ids came from, for messages."""
        return "the render endpoint" if self.name == "render" else "/tokenize"


def server_ids(
    client: openai.OpenAI,
    model: str,
    prompt: ProbePrompt,
    base: str,
    kwargs: dict[str, Any] | None,
    route: IdsRoute,
    tok: Tokenizer,
) -> list[int]:
    """The server's ids for ``prompt``: the render endpoint (vLLM, where enabled; its
    token offsets checked once) or ``/tokenize`` (:func:`_tokenize`)."""
    if route.render and prompt.messages is not None:
        try:
            rendered = render_ids(
                client, model=model, messages=prompt.messages, base=base, kwargs=kwargs
            )
        except RenderUnavailable as exc:
            route.render, route.failed, route.note = False, route.failed + 1, f"{exc}"
        else:
            if route.name is None:
                route.name, route.note = (
                    "render",
                    check_offsets(tok.tokenize(prompt.text), rendered),
                )
            return list(rendered.ids)
    ids = route.tokenize(prompt, kwargs)
    if route.name is None:
        route.name = "tokenize"
        route.note = f"{route.note}; ids from /tokenize" if route.note else None
    return ids


def effort_table_of(
    client: openai.OpenAI,
    model: str,
    base: str,
    tok: Tokenizer,
    offset: int | None,
    route: IdsRoute,
) -> str | None:
    """The DeepSeek-V4.1 effort table the server uses (one request): the known table whose
    render of effort "low" the server's ids end with (after ``offset`` tokens of its own;
    ``None``: any number); ``None`` (and a warning) when none does."""
    from phaseaware.chat.deepseek_v41 import EFFORT_TABLES

    stated = ChatSettings(thinking=True, reasoning_effort="low")
    kwargs = stated.chat_template_kwargs("deepseek-v4.1")
    renders = {
        name: probe_prompts(
            tok, "deepseek-v4.1",
            settings=ChatSettings(thinking=True, reasoning_effort="low", effort_budgets=name),
        )[1]
        for name in EFFORT_TABLES
    }  # fmt: skip
    server = server_ids(client, model, next(iter(renders.values())), base, kwargs, route, tok)
    for name, prompt in renders.items():
        extra = len(server) - len(prompt.ids)
        if (
            extra >= 0
            and (offset is None or extra == offset)
            and server[extra:] == list(prompt.ids)
        ):
            return name
    warnings.warn(
        f"{redact_url(base)} writes a DeepSeek-V4.1 effort budget for 'low' that no known "
        f"effort table ({', '.join(EFFORT_TABLES)}) has; pass integer efforts, or tell "
        "phaseaware's maintainers the checkpoint's table",
        PhaseawareWarning,
        stacklevel=3,
    )
    return None


def server_default_of(
    client: openai.OpenAI,
    model: str,
    base: str,
    tok: Tokenizer,
    chat_format: str,
    offset: int,
    route: IdsRoute,
    table: str | None = None,
) -> dict[str, Any]:
    """What a request naming no chat settings gets (one request for ids), against
    phaseaware's renders thinking off, on, and on with each reasoning effort (V4.1: with
    the server's effort ``table``)."""
    candidates = [ChatSettings(), ChatSettings(thinking=True, effort_budgets=table)]
    candidates += [
        ChatSettings(thinking=True, reasoning_effort=e, effort_budgets=table) for e in EFFORTS
    ]
    renders: list[tuple[dict[str, Any], ProbePrompt]] = []
    for settings in candidates:
        try:
            prompt = probe_prompts(tok, chat_format, settings=settings)[1]
        except ChatSettingsError:  # the format does not render this setting
            continue
        named = {"thinking": settings.thinking, "reasoning_effort": settings.reasoning_effort}
        renders.append((named, prompt))
    server = server_ids(client, model, renders[0][1], base, None, route, tok)
    return discover_default(server, [(s, p.ids) for s, p in renders], offset=offset)
