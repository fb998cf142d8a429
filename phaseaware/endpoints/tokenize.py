"""A server's own tokens for a prompt: ``POST /tokenize`` (vLLM's route, at the server root or
under the API base), for text or for a chat request the server renders itself.

llama.cpp's ``llama-server`` has a ``/tokenize`` that reads only ``content`` (text) and
answers any other body with an empty list; there the chat prompt comes from its
``/apply-template`` (the server's own Jinja render, generation prompt included) and is
tokenized as its chat route does (``add_special`` and ``parse_special`` on). An empty
list for a non-empty request is never taken as the server's ids."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any

from phaseaware.endpoints.record import redact_url
from phaseaware.endpoints.values import check_token_ids
from phaseaware.errors import EndpointError

if TYPE_CHECKING:
    import openai

__all__ = ["TokenizeUnavailable", "server_token_ids"]


class TokenizeUnavailable(EndpointError):
    """The server has no usable ``/tokenize`` route (exact mode impossible)."""


def server_token_ids(
    client: openai.OpenAI,
    model: str,
    *,
    base: str,
    text: str | None = None,
    messages: Sequence[Mapping[str, Any]] | None = None,
    kwargs: Mapping[str, Any] | None = None,
) -> list[int]:
    """The server's token ids for ``text``, or for ``messages`` with the generation prompt
    (``kwargs`` sent as ``chat_template_kwargs``; ``None`` states nothing). ``base`` is the API
    base URL (``.../v1``); the route is tried at the server root, then under the base.

    Raises :class:`TokenizeUnavailable` when neither route answers with a token list.
    """
    import openai

    base = base.rstrip("/")
    body: dict[str, Any] = {"model": model}
    if messages is not None:
        body.update(messages=[dict(m) for m in messages], add_generation_prompt=True)
        if kwargs is not None:
            body["chat_template_kwargs"] = dict(kwargs)
    else:
        body.update(prompt=text or "")
    root = base[: -len("/v1")] if base.endswith("/v1") else base
    for url in dict.fromkeys((root + "/tokenize", base + "/tokenize")):
        try:
            doc = client.post(url, body=body, cast_to=object)
        except openai.NotFoundError:
            continue
        except (openai.APIError, ValueError) as exc:  # ValueError: a body that is not JSON
            raise TokenizeUnavailable(
                f"/tokenize at {redact_url(url)} failed ({type(exc).__name__})"
            ) from None
        tokens = _tokens(doc, source=f"/tokenize at {redact_url(url)}")
        if tokens is None:
            raise TokenizeUnavailable(f"/tokenize at {redact_url(url)} returned no token list")
        if tokens or (messages is None and not text):
            return tokens
        # an empty list for a non-empty request: llama-server's /tokenize, which reads `content`
        return _llama_server_ids(client, root=root, url=url, text=text, messages=messages,
                                 kwargs=kwargs)  # fmt: skip
    raise TokenizeUnavailable(f"{redact_url(base)} has no /tokenize route")


def _tokens(doc: object, *, source: str) -> list[int] | None:
    """The ``tokens`` list of ``doc``, every one a token id (else :class:`EndpointError`
    naming the value); ``None`` when there is no list."""
    tokens = doc.get("tokens") if isinstance(doc, dict) else None
    if isinstance(tokens, list):
        return check_token_ids(tokens, source=source)
    return None


def _llama_server_ids(
    client: openai.OpenAI,
    *,
    root: str,
    url: str,
    text: str | None,
    messages: Sequence[Mapping[str, Any]] | None,
    kwargs: Mapping[str, Any] | None,
) -> list[int]:
    """llama-server's ids: the chat prompt from ``/apply-template``, then ``/tokenize`` of
    ``content`` with special tokens added and parsed (as its completion routes do)."""
    import openai

    empty = f"/tokenize at {redact_url(url)} answered an empty token list for a non-empty prompt"
    prompt = text or ""
    try:
        if messages is not None:
            body: dict[str, Any] = {"messages": [dict(m) for m in messages]}
            if kwargs is not None:
                body["chat_template_kwargs"] = dict(kwargs)
            doc = client.post(root + "/apply-template", body=body, cast_to=object)
            rendered = doc.get("prompt") if isinstance(doc, dict) else None
            if not isinstance(rendered, str) or not rendered:
                raise TokenizeUnavailable(
                    f"{empty}, and its /apply-template returned no prompt: the server shows no "
                    "chat ids; probe with --mode count"
                )
            prompt = rendered
        doc = client.post(
            root + "/tokenize",
            body={"content": prompt, "add_special": True, "parse_special": True},
            cast_to=object,
        )
    except (openai.APIError, ValueError) as exc:  # ValueError: a body that is not JSON
        raise TokenizeUnavailable(
            f"{empty}; llama.cpp's /apply-template and /tokenize of content failed "
            f"({type(exc).__name__}): probe with --mode count"
        ) from None
    tokens = _tokens(doc, source=f"/tokenize of content at {redact_url(root)}")
    if not tokens:
        raise TokenizeUnavailable(f"{empty}, also for content: probe with --mode count")
    return tokens
