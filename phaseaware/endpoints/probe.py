"""Discovery: how an endpoint's token positions relate to phaseaware's rendering.

``probe_endpoint`` renders a few tiny probe conversations with the caller's
tokenizer and chat format and asks the server what it made of them:

* **exact mode**: vLLM's ``POST /v1/chat/completions/render`` where the server
  enables it (``--enable-scale-out``; token offsets requested and checked where it
  returns them, :mod:`phaseaware.endpoints.render_route`), else ``POST /tokenize``
  (vLLM's route, at the server root or under ``/v1``; SGLang answers the same shape),
  takes the probe's ``messages`` and returns the server's token ids
  (``ids_route``/``ids_note`` in the record). They must end with phaseaware's ids; the
  tokens before them are the offset. Anything else is a
  :class:`TemplateMismatchError` naming the first differing token. One chat call
  (``max_tokens=1``) then confirms that the chat route counts what ``/tokenize``
  showed (a hidden preamble added only at chat time sends ``auto`` to count mode).
* **count mode**: ``rounds`` x 6 chat calls (``max_tokens=1``) whose content
  before the context slot's end differs by known token counts (0..8 filler
  units); ``d = usage.prompt_tokens - planned tokens`` per call. One ``d`` for
  all: constant. ``d`` differing between *identical* requests: varying, with
  the observed set. ``d`` that depends on the content but not on the repetition:
  no constant offset explains the counts (another tokenizer or template) ->
  :class:`TemplateMismatchError` saying what differed. Count mode sees totals
  only: it assumes the server's extra tokens come before the context (a BOS, a
  hidden system preamble, a date line), which exact mode checks.

Every probe request states its chat settings (:mod:`phaseaware.endpoints.request_settings`).
Exact mode records what a request naming none gets (``server_default``) and, for
``deepseek-v4.1``, which effort table the server uses (``effort_budgets``: the
budgets are one token each, so only the ids tell the tables apart, never a count);
count mode checks thinking on/off or says it cannot tell
(:mod:`phaseaware.endpoints.defaults`).
The record keeps the ``model`` and ``system_fingerprint`` the server reports, and the
server software and ``hf`` template (:mod:`phaseaware.endpoints.server`). The server is
identified first: SGLang renders DeepSeek formats through DeepSeek's reference encoder,
so its probes are rendered so and the record says ``renderer: sglang``. For
``deepseek-v4`` at other servers one more request finds the checkpoint's effort texts
(``effort_texts``, :mod:`phaseaware.endpoints.effort_texts`).

The result is an :class:`~phaseaware.endpoints.record.EndpointRecord`,
saved atomically per (base URL, model) unless ``save=False``. API keys are
never written; URLs in messages and records are redacted.
"""

from __future__ import annotations

import datetime as _dt
import os
import warnings
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal

from phaseaware.chat import ChatSettings
from phaseaware.credentials import api_key_from_env
from phaseaware.endpoints.defaults import (
    TemplateMismatchError,
    compare_tokens,
    thinking_distinguished,
)
from phaseaware.endpoints.effort_texts import EFFORT_PROBE, effort_texts_of
from phaseaware.endpoints.probe_ids import (
    IdsRoute,
    effort_table_of,
    server_default_of,
    server_ids,
)
from phaseaware.endpoints.prompts import PROBE_QUESTION, ProbePrompt, probe_prompts
from phaseaware.endpoints.record import EndpointRecord, redact_url, save_endpoint_record
from phaseaware.endpoints.request_settings import chat_template_kwargs
from phaseaware.endpoints.server import identify, with_server
from phaseaware.endpoints.tokenize import TokenizeUnavailable, server_token_ids
from phaseaware.endpoints.tool_arguments import (
    TOOL_HISTORY,
    matched_form,
    tool_argument_lengths,
)
from phaseaware.endpoints.usage import check_prompt_tokens
from phaseaware.endpoints.values import check_token_count
from phaseaware.errors import EndpointError, InputError, PhaseawareWarning
from phaseaware.httpclient import failure_message, openai_client
from phaseaware.tokenizers import load_tokenizer
from phaseaware.tokenizers.base import Tokenizer
from phaseaware.version import __version__

if TYPE_CHECKING:  # pragma: no cover
    import openai

__all__ = [
    "API_KEY_ENV_VARS",
    "PROBE_QUESTION",
    "ProbePrompt",
    "TemplateMismatchError",
    "TokenizeUnavailable",
    "compare_tokens",
    "make_client",
    "probe_endpoint",
    "probe_prompts",
]

API_KEY_ENV_VARS = ("PHASEAWARE_API_KEY", "OPENAI_API_KEY")
Mode = Literal["auto", "exact", "count"]


def make_client(
    base_url: str, *, api_key: str | None = None, timeout: float = 30.0
) -> openai.OpenAI:
    """An official ``openai`` client (:func:`phaseaware.httpclient.openai_client`: a
    deadline per attempt, a size cap); the key from ``api_key`` or the environment."""
    key = api_key or api_key_from_env(API_KEY_ENV_VARS, error=EndpointError)
    return openai_client(base_url, api_key=key or "EMPTY", timeout=timeout, max_retries=2)


@dataclass
class _Seen:
    """The served checkpoint's identity as the responses report it (last seen)."""

    model: str | None = None
    fingerprint: str | None = None


def _send(
    client: openai.OpenAI,
    model: str,
    prompt: ProbePrompt,
    url: str,
    kwargs: dict[str, Any] | None = None,
    seen: _Seen | None = None,
) -> int:
    """usage.prompt_tokens of one tiny request (``max_tokens=1``) stating ``kwargs``."""
    import openai

    try:
        if prompt.messages is not None:
            response: Any = client.chat.completions.create(
                model=model,
                messages=list(prompt.messages),  # type: ignore[arg-type]
                max_tokens=1,
                temperature=0,
                extra_body={"chat_template_kwargs": kwargs} if kwargs is not None else None,
            )
        else:
            response = client.completions.create(
                model=model, prompt=prompt.text, max_tokens=1, temperature=0
            )
    except openai.APIStatusError as exc:
        raise EndpointError(
            f"{url} answered HTTP {exc.status_code} to a probe: check --base-url, --model and "
            "the API key (--api-key-file or PHASEAWARE_API_KEY)"
        ) from None
    except openai.APIError as exc:
        raise EndpointError(failure_message(exc, url)) from None
    if seen is not None:
        seen.model = _text(getattr(response, "model", None)) or seen.model
        seen.fingerprint = _text(getattr(response, "system_fingerprint", None)) or seen.fingerprint
    usage = getattr(response, "usage", None)
    reported = getattr(usage, "prompt_tokens", None)
    if reported is None:
        raise EndpointError(
            f"{url} reports no usage.prompt_tokens, so the offset cannot be counted; use a "
            "server that reports usage, or one with /tokenize (exact mode)"
        )
    return check_token_count(reported, source=url)


def _text(value: object) -> str | None:
    return value if isinstance(value, str) and value else None


def _tokenize(
    client: openai.OpenAI,
    model: str,
    prompt: ProbePrompt,
    base: str,
    kwargs: dict[str, Any] | None = None,
) -> list[int]:
    """The server's token ids for ``prompt`` (see :func:`server_token_ids`)."""
    if prompt.messages is not None:
        return server_token_ids(client, model, base=base, messages=prompt.messages, kwargs=kwargs)
    return server_token_ids(client, model, base=base, text=prompt.text)


def _count_offsets(
    client: openai.OpenAI,
    model: str,
    prompts: Sequence[ProbePrompt],
    rounds: int,
    url: str,
    kwargs: dict[str, Any] | None,
    identity: _Seen,
) -> tuple[int, ...]:
    """The offsets observed in count mode (sorted, distinct), or the typed error."""
    seen: dict[int, list[int]] = {p.units: [] for p in prompts}
    for _ in range(rounds):
        for p in prompts:
            seen[p.units].append(_send(client, model, p, url, kwargs, identity) - len(p.ids))
    values = sorted({d for ds in seen.values() for d in ds})
    repeatable = all(len(set(ds)) == 1 for ds in seen.values())
    if len(values) > 1 and repeatable:
        detail = "; ".join(
            f"{len(p.ids)} tokens counted as {len(p.ids) + seen[p.units][0]}" for p in prompts
        )
        raise TemplateMismatchError(
            f"no constant offset explains {url}'s usage.prompt_tokens: prompts that differ only "
            f"by known filler tokens were counted with offsets {values} ({detail}); the server "
            "tokenizes the content differently: check --tokenizer and --chat-format"
        )
    if values[0] < 0:
        raise TemplateMismatchError(
            f"{url} counted fewer prompt tokens than phaseaware rendered (offsets {values}): "
            "it renders another chat format or drops text; check --chat-format"
        )
    return tuple(values)


def _check_thinking_counts(
    client: openai.OpenAI,
    model: str,
    tok: Tokenizer,
    chat_format: str,
    thinking: bool,
    url: str,
    offsets: tuple[int, ...],
    renderer: str | None = None,
) -> str:
    """Count mode's thinking check (two requests): ``"verified"``, or why a count cannot
    tell (also warned); ``TemplateMismatchError`` when the server renders it otherwise."""
    probes = {
        t: probe_prompts(tok, chat_format, thinking=t, settings=_stated(t, renderer))[1]
        for t in (False, True)
    }
    if probes[False].text == probes[True].text:
        return "verified"

    def count(t: bool) -> int:
        kwargs = chat_template_kwargs(chat_format=chat_format, thinking=t, renderer=renderer)
        return _send(client, model, probes[t], url, kwargs)

    ok, problem = thinking_distinguished(
        count=count,
        local_lengths={t: len(p.ids) for t, p in probes.items()},
        texts_differ=True,
        thinking=thinking,
        offsets=offsets,
    )
    if not ok:
        raise TemplateMismatchError(f"count mode at {url}: {problem}")
    if problem is None:
        return "verified"
    warnings.warn(f"count mode at {url}: {problem}", PhaseawareWarning, stacklevel=3)
    return f"cannot tell: {problem}"


def _stated(thinking: bool, renderer: str | None) -> ChatSettings | None:
    """The settings a probe renders with for the server's renderer (``None``: the format's
    default, vLLM's)."""
    return ChatSettings(thinking=thinking, renderer=renderer) if renderer else None


def probe_endpoint(
    *,
    base_url: str,
    model: str,
    tokenizer: str | Tokenizer,
    chat_format: str,
    api_key: str | None = None,
    client: openai.OpenAI | None = None,
    mode: Mode = "auto",
    rounds: int = 3,
    thinking: bool = False,
    save: bool = True,
    directory: str | os.PathLike[str] | None = None,
    timeout: float = 30.0,
) -> EndpointRecord:
    """Discover the endpoint's offset; return (and by default save) its record.

    ``mode``: ``exact`` (server ids only: vLLM's render endpoint where enabled, else
    ``/tokenize``), ``count`` (usage counts only) or ``auto`` (exact where the server
    shows ids and the chat route agrees, else count). ``timeout``: seconds per HTTP
    attempt, connect to last byte. Raises ``TemplateMismatchError`` when no constant offset explains
    what the server tokenized, ``EndpointError`` when the server cannot be probed.
    """
    if mode not in ("auto", "exact", "count"):
        raise InputError(f"mode must be auto, exact or count, got {mode!r}")
    if isinstance(rounds, bool) or not isinstance(rounds, int) or rounds < 2:
        raise InputError(f"rounds must be an integer >= 2 (repeats tell varying), got {rounds!r}")
    tok = load_tokenizer(tokenizer) if isinstance(tokenizer, str) else tokenizer
    base = base_url.strip().rstrip("/")
    url = redact_url(base)
    client = client if client is not None else make_client(base, api_key=api_key, timeout=timeout)
    # the server first: a DeepSeek format renders with the server's renderer (SGLang:
    # deepseek-recipe), so every probe is rendered as that server renders it
    identified = identify(client, base)
    software = identified[0]
    deepseek = chat_format in ("deepseek-v4", "deepseek-v4.1")
    renderer = software.renderer if software is not None and deepseek else None
    prompts = probe_prompts(
        tok, chat_format, thinking=thinking, settings=_stated(thinking, renderer)
    )
    kwargs = chat_template_kwargs(chat_format=chat_format, thinking=thinking, renderer=renderer)
    identity = _Seen()
    offsets: tuple[int, ...] | None = None
    used: Literal["exact", "count"] = "count"
    default: dict[str, Any] | None = None
    settings_check: str | None = None
    table: str | None = None
    route = IdsRoute(lambda p, k: _tokenize(client, model, p, base, k))
    requests = 0
    if mode in ("auto", "exact"):
        try:
            if chat_format == "deepseek-v4.1" and renderer is None:
                # first: the table decides every thinking-mode render (budgets differ in id)
                table = effort_table_of(client, model, base, tok, None, route)
                requests += 1
                if table is not None:
                    stated = ChatSettings(thinking=thinking, effort_budgets=table)
                    prompts = probe_prompts(tok, chat_format, settings=stated)
            found = {compare_tokens(server_ids(client, model, p, base, kwargs, route, tok),
                                    p.ids, tok, url=url, thinking=thinking,
                                    source=route.label)
                     for p in (prompts[1], prompts[-1])}  # fmt: skip
            requests += 2
            exact = min(found)
            if len(found) > 1:
                raise TemplateMismatchError(
                    f"{route.label} of {url} puts {sorted(found)} tokens before probes that "
                    "differ only in content: check --chat-format"
                )
            check = check_prompt_tokens(
                planned_tokens=len(prompts[1].ids),
                reported_tokens=_send(client, model, prompts[1], url, kwargs, identity),
                offset=exact,
                on_mismatch="ignore",
            )
            requests += 1
            if check.ok:
                offsets, used = (exact,), "exact"
                if kwargs is not None and renderer is None:
                    default = server_default_of(
                        client, model, base, tok, chat_format, exact, route, table
                    )
                    requests += 1
            elif mode == "exact":
                raise EndpointError(
                    f"{route.label} of {url} shows offset {exact} but the chat route counted "
                    f"{check.observed_offset}: the server adds text at chat time; rerun with "
                    "--mode count"
                )
        except TokenizeUnavailable:
            if mode == "exact":
                raise
    if offsets is None:
        offsets = _count_offsets(client, model, prompts, rounds, url, kwargs, identity)
        requests += rounds * len(prompts)
        if kwargs is not None:
            settings_check = _check_thinking_counts(
                client, model, tok, chat_format, thinking, url, offsets, renderer
            )
            requests += 2
    texts = None
    if chat_format == "deepseek-v4" and renderer is None and len(offsets) == 1:
        # one more request: the checkpoint's effort texts (vLLM writes 0731's for every V4)
        effort_kwargs = EFFORT_PROBE.chat_template_kwargs(chat_format)
        texts = effort_texts_of(
            tokenizer=tok,
            offset=offsets[0],
            count=lambda p: _send(client, model, p, url, effort_kwargs, identity),
            where=url,
            exact=used == "exact",
        )
        requests += 1
    requests += route.failed
    arguments = None
    lengths = tool_argument_lengths(tok, thinking=thinking) if chat_format == "hf" else None
    if lengths is not None:  # one more request: how the server hands tool calls to the template
        history = ProbePrompt(0, "", TOOL_HISTORY, ())
        requests += 1
        try:
            counted = _send(client, model, history, url, kwargs, identity)
        except EndpointError:  # the server refuses the tool history: nothing learned
            counted = None
        if counted is not None:
            arguments = matched_form(lengths, counted=counted, offsets=offsets)
    record = EndpointRecord(
        base_url=url,
        model=model,
        offset=offsets[0],
        offsets=offsets,
        mode=used,
        stability="constant" if len(offsets) == 1 else "varying",
        date=_dt.datetime.now(_dt.UTC).isoformat(timespec="seconds"),
        tokenizer_spec=tok.spec,
        tokenizer_fingerprint=tok.fingerprint(),
        chat_format=chat_format,
        probes=requests,
        tool_version=__version__,
        thinking=thinking,
        server_default=default,
        served_model=identity.model,
        system_fingerprint=identity.fingerprint,
        settings_check=settings_check,
        effort_budgets=table,
        ids_route=route.name if used == "exact" else None,
        ids_note=route.note if used == "exact" else None,
        tool_arguments=arguments,
        renderer=renderer,
        effort_texts=texts,
    )
    record = with_server(record, client=client, base=base, tokenizer=tok, identified=identified)
    if save:
        save_endpoint_record(record, directory=Path(directory) if directory else None)
    return record
