"""A server's own tokens for a prompt: ``POST /tokenize`` (vLLM's route, at the server root or
under the API base), for text or for a chat request the server renders itself."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any

from phaseaware.endpoints.record import redact_url
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
        except openai.APIError as exc:
            raise TokenizeUnavailable(
                f"/tokenize at {redact_url(url)} failed ({type(exc).__name__})"
            ) from None
        tokens = doc.get("tokens") if isinstance(doc, dict) else None
        if isinstance(tokens, list) and all(isinstance(t, int) for t in tokens):
            return tokens
        raise TokenizeUnavailable(f"/tokenize at {redact_url(url)} returned no token list")
    raise TokenizeUnavailable(f"{redact_url(base)} has no /tokenize route")
