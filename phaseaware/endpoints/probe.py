"""Discovery: how an endpoint's token positions relate to phaseaware's rendering.

``probe_endpoint`` renders a few tiny probe conversations with the caller's
tokenizer and chat format and asks the server what it made of them:

* **exact mode**: ``POST /tokenize`` (vLLM's route, at the server root or under
  ``/v1``; SGLang answers the same shape) takes the probe's ``messages`` and
  returns the server's token ids. They must end with phaseaware's ids; the
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

The result is an :class:`~phaseaware.endpoints.record.EndpointRecord`,
saved atomically per (base URL, model) unless ``save=False``. API keys are
never written; URLs in messages and records are redacted.
"""

from __future__ import annotations

import datetime as _dt
import os
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal

from phaseaware.assembly.prepare.filler import find_filler
from phaseaware.chat import conversation_layout
from phaseaware.endpoints.record import EndpointRecord, redact_url, save_endpoint_record
from phaseaware.endpoints.usage import check_prompt_tokens
from phaseaware.errors import EndpointError, InputError
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
PROBE_QUESTION = "Reply with one word."
PROBE_UNITS = (0, 1, 2, 3, 5, 8)  # filler units before the end of the context slot
Mode = Literal["auto", "exact", "count"]


class TemplateMismatchError(EndpointError):
    """No constant offset explains what the server tokenized (other tokenizer or template)."""


class TokenizeUnavailable(EndpointError):
    """The server has no usable ``/tokenize`` route (exact mode impossible)."""


@dataclass(frozen=True)
class ProbePrompt:
    """One probe: its messages (or completion text) and phaseaware's token ids."""

    units: int  # filler units in the context
    text: str
    messages: tuple[dict[str, str], ...] | None  # None: a plain completion prompt
    ids: tuple[int, ...]


def probe_prompts(
    tokenizer: Tokenizer, chat_format: str, *, thinking: bool = False
) -> tuple[ProbePrompt, ...]:
    """The probe prompts, rendered and tokenized as phaseaware would send them."""
    layout = conversation_layout(tokenizer=tokenizer, chat_format=chat_format, thinking=thinking)
    unit = find_filler(tokenizer, period=8).unit
    prompts = []
    for k in PROBE_UNITS:
        rendered = layout.render(
            system=None, context="Probe context:" + unit * k, question=PROBE_QUESTION
        )
        prompts.append(
            ProbePrompt(k, rendered.text, rendered.messages, tuple(tokenizer.encode(rendered.text)))
        )
    return tuple(prompts)


def make_client(
    base_url: str, *, api_key: str | None = None, timeout: float = 30.0
) -> openai.OpenAI:
    """An official ``openai`` client; the key from ``api_key`` or the environment."""
    import openai

    key = api_key or next((os.environ[v] for v in API_KEY_ENV_VARS if os.environ.get(v)), None)
    return openai.OpenAI(base_url=base_url, api_key=key or "EMPTY", timeout=timeout, max_retries=2)


def _send(client: openai.OpenAI, model: str, prompt: ProbePrompt, url: str) -> int:
    """usage.prompt_tokens of one tiny request (``max_tokens=1``)."""
    import openai

    try:
        if prompt.messages is not None:
            response: Any = client.chat.completions.create(
                model=model,
                messages=list(prompt.messages),  # type: ignore[arg-type]
                max_tokens=1,
                temperature=0,
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
        raise EndpointError(
            f"cannot reach {url} ({type(exc).__name__}): check --base-url and that the server runs"
        ) from None
    usage = getattr(response, "usage", None)
    reported = getattr(usage, "prompt_tokens", None)
    if not isinstance(reported, int):
        raise EndpointError(
            f"{url} reports no usage.prompt_tokens, so the offset cannot be counted; use a "
            "server that reports usage, or one with /tokenize (exact mode)"
        )
    return reported


def _tokenize(client: openai.OpenAI, model: str, prompt: ProbePrompt, base: str) -> list[int]:
    """The server's token ids for ``prompt`` via ``/tokenize`` (root, then under the base)."""
    import openai

    body: dict[str, Any] = {"model": model}
    if prompt.messages is not None:
        body.update(messages=list(prompt.messages), add_generation_prompt=True)
    else:
        body.update(prompt=prompt.text)
    root = base[: -len("/v1")] if base.endswith("/v1") else base
    for url in dict.fromkeys((root + "/tokenize", base + "/tokenize")):
        try:
            doc = client.post(url, body=body, cast_to=object)
        except openai.NotFoundError:
            continue
        except openai.APIError as exc:
            raise TokenizeUnavailable(
                f"/tokenize at {redact_url(url)} failed ({type(exc).__name__})"
            ) from None
        tokens = doc.get("tokens") if isinstance(doc, dict) else None
        if isinstance(tokens, list) and all(isinstance(t, int) for t in tokens):
            return tokens
        raise TokenizeUnavailable(f"/tokenize at {redact_url(url)} returned no token list")
    raise TokenizeUnavailable(f"{redact_url(base)} has no /tokenize route")


def _piece(tokenizer: Tokenizer, ids: Sequence[int], j: int) -> str:
    return f"id {ids[j]} {tokenizer.decode([ids[j]])!r}" if j < len(ids) else "(end)"


def compare_tokens(
    server: Sequence[int], local: Sequence[int], tokenizer: Tokenizer, *, url: str
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
        f", phaseaware has {_piece(tokenizer, local, j)}; the server's chat template is not "
        "--chat-format's: pick the matching --chat-format (or hf with the server's tokenizer)"
    )


def _count_offsets(
    client: openai.OpenAI, model: str, prompts: Sequence[ProbePrompt], rounds: int, url: str
) -> tuple[int, ...]:
    """The offsets observed in count mode (sorted, distinct), or the typed error."""
    seen: dict[int, list[int]] = {p.units: [] for p in prompts}
    for _ in range(rounds):
        for p in prompts:
            seen[p.units].append(_send(client, model, p, url) - len(p.ids))
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
) -> EndpointRecord:
    """Discover the endpoint's offset; return (and by default save) its record.

    ``mode``: ``exact`` (``/tokenize`` only), ``count`` (usage counts only) or
    ``auto`` (exact where ``/tokenize`` exists and the chat route agrees, else
    count). Raises ``TemplateMismatchError`` when no constant offset explains
    what the server tokenized, ``EndpointError`` when the server cannot be probed.
    """
    if mode not in ("auto", "exact", "count"):
        raise InputError(f"mode must be auto, exact or count, got {mode!r}")
    if isinstance(rounds, bool) or not isinstance(rounds, int) or rounds < 2:
        raise InputError(f"rounds must be an integer >= 2 (repeats tell varying), got {rounds!r}")
    tok = load_tokenizer(tokenizer) if isinstance(tokenizer, str) else tokenizer
    base = base_url.strip().rstrip("/")
    url = redact_url(base)
    client = client if client is not None else make_client(base, api_key=api_key)
    prompts = probe_prompts(tok, chat_format, thinking=thinking)
    offsets: tuple[int, ...] | None = None
    used: Literal["exact", "count"] = "count"
    requests = 0
    if mode in ("auto", "exact"):
        try:
            found = {compare_tokens(_tokenize(client, model, p, base), p.ids, tok, url=url)
                     for p in (prompts[1], prompts[-1])}  # fmt: skip
            requests += 2
            exact = min(found)
            if len(found) > 1:
                raise TemplateMismatchError(
                    f"/tokenize of {url} puts {sorted(found)} tokens before probes that differ "
                    "only in content: check --chat-format"
                )
            check = check_prompt_tokens(
                planned_tokens=len(prompts[1].ids),
                reported_tokens=_send(client, model, prompts[1], url),
                offset=exact,
                on_mismatch="ignore",
            )
            requests += 1
            if check.ok:
                offsets, used = (exact,), "exact"
            elif mode == "exact":
                raise EndpointError(
                    f"/tokenize of {url} shows offset {exact} but the chat route counted "
                    f"{check.observed_offset}: the server adds text at chat time; rerun with "
                    "--mode count"
                )
        except TokenizeUnavailable:
            if mode == "exact":
                raise
    if offsets is None:
        offsets = _count_offsets(client, model, prompts, rounds, url)
        requests += rounds * len(prompts)
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
    )
    if save:
        save_endpoint_record(record, directory=Path(directory) if directory else None)
    return record
