"""The server's own reply body, so the middleware can check the prompt id for id.

**Why an httpx event hook.** vLLM returns the prompt's token ids for ``return_token_ids``
(``ChatCompletionResponse.prompt_token_ids``), SGLang for ``return_prompt_token_ids`` (on
the first choice). ``langchain-openai`` 1.8's ``ChatOpenAI`` drops both before anyone can
see them. ``_create_chat_result`` builds each ``AIMessage`` from the choice's ``message``,
``usage``, ``finish_reason`` and ``logprobs``, and ``llm_output`` from ``model``,
``system_fingerprint``, ``id`` and ``service_tier``. No other top-level or per-choice
field is kept, not even in ``response_metadata``.

The other routes do not help:

- ``include_response_headers`` carries headers only, and the ids are in the body.
- ``stream_usage`` carries the usage chunk's counts, not ids.
- A subclass overriding ``_create_chat_result`` would see the parsed response. That
  method is private (an underscore name, not a documented hook), so any release may
  change or remove it without notice.
- Patching ``langchain-openai`` at import time would change every user's ``ChatOpenAI``.

The public route is the one ``ChatOpenAI`` documents for the transport: its
``http_client`` / ``http_async_client`` arguments. httpx's documented response event hook
runs there, and it reads the body itself (``response.read()``, as httpx's docs say to).
:func:`prompt_ids_clients` builds both clients, with ``openai``'s defaults
(``DefaultHttpxClient``), and the hooks.

**Whose body.** The middleware opens :func:`capture` around its own model call. The
hooks run in the caller's thread (sync) or task (async), so a context variable brings
each JSON reply into that call's capture and no other.

**A chain's callback.** ``PhaseAwareUsageCheck`` runs in no such context of its own: a
callback's ``on_llm_end`` may run in another thread than the request. Outside a capture
the hooks therefore keep each JSON reply in one small process-wide store keyed by the
response ``id`` (:class:`phaseaware.integrate.ReplyStore`: bounded, each reply taken once,
an id seen twice handed to nobody). The callback takes its reply's body by the ``id``
that ``ChatOpenAI`` keeps in ``response_metadata``.

**Asking only where it helps.** :func:`delivers_replies` says whether a chat model's
client carries these hooks (the marker is the hook itself, in httpx's public
``event_hooks``) and does not stream. The middleware and
``PhaseAwarePrompt.model_kwargs(model)`` ask the server for the ids only then, so a plain
``ChatOpenAI`` request carries no ids field.

**Streaming.** An event-stream reply is never read here, because reading it would
consume the stream. vLLM still puts the ids in its first chunk, and langchain-openai drops
them there too. A streamed call therefore hands over no ids. The middleware then checks
the count from the usage chunk (``stream_usage``), as it did before; without a usage chunk
it checks nothing.
"""

from __future__ import annotations

import contextlib
import contextvars
import json
from collections.abc import Iterator, Mapping, Sequence
from typing import Any

import httpx

import phaseaware.integrate as kit

__all__ = [
    "REPLIES",
    "arecord_reply",
    "capture",
    "captured",
    "delivers_replies",
    "prompt_ids_clients",
    "record_reply",
    "reply_body",
    "take_reply",
]

#: the replies received outside a capture, by response id, for ``PhaseAwareUsageCheck``
REPLIES = kit.ReplyStore(name="langchain_phaseaware.replies")

#: the bodies of the current model call's replies (None: no call is capturing)
_BODIES: contextvars.ContextVar[list[dict[str, Any]] | None] = contextvars.ContextVar(
    "phaseaware_reply_bodies", default=None
)


@contextlib.contextmanager
def capture() -> Iterator[list[dict[str, Any]]]:
    """The JSON chat-completion bodies received, through :func:`prompt_ids_clients`,
    while the block runs in this context (a new list, filled as replies arrive)."""
    bodies: list[dict[str, Any]] = []
    token = _BODIES.set(bodies)
    try:
        yield bodies
    finally:
        _BODIES.reset(token)


def captured() -> list[dict[str, Any]]:
    """The bodies kept so far by the innermost :func:`capture` of this context (a copy;
    empty outside one)."""
    return list(_BODIES.get() or ())


def _json(response: httpx.Response) -> bool:
    """A 200 JSON reply (not an event stream, which is never read here)."""
    kind = response.headers.get("content-type", "")
    return response.status_code == 200 and kind.split(";", 1)[0].strip() == "application/json"


def _keep(bodies: list[dict[str, Any]] | None, content: bytes) -> None:
    try:
        body = json.loads(content)
    except ValueError:
        return  # not JSON after all: the client reports it; there is nothing to check
    if not (isinstance(body, dict) and "choices" in body):
        return
    if bodies is not None:
        bodies.append(body)  # this call's capture
    else:
        REPLIES.keep(body)  # for a callback, by response id


def record_reply(response: httpx.Response) -> None:
    """httpx response hook (sync client): keep a chat reply's body for the :func:`capture`
    open in this context, else in :data:`REPLIES`."""
    if _json(response):
        _keep(_BODIES.get(), response.read())


async def arecord_reply(response: httpx.Response) -> None:
    """httpx response hook (async client): as :func:`record_reply`."""
    if _json(response):
        _keep(_BODIES.get(), await response.aread())


def delivers_replies(model: object, *, asynchronous: bool) -> bool:
    """Whether ``model`` (a chat model) hands its reply bodies to phaseaware: its public
    ``http_client`` (``http_async_client`` for an async call) carries this module's hook
    (:func:`prompt_ids_clients`), and it does not always stream (``streaming=True``:
    a stream is never read here)."""
    if getattr(model, "streaming", False) is True:
        return False
    client = getattr(model, "http_async_client" if asynchronous else "http_client", None)
    hooks = client.event_hooks.get("response", ()) if isinstance(client, _CLIENTS) else ()
    return (arecord_reply if asynchronous else record_reply) in hooks


_CLIENTS = (httpx.Client, httpx.AsyncClient)


def take_reply(reply_id: object, *, prompt_tokens: int | None) -> dict[str, Any] | None:
    """The body of reply ``reply_id`` kept in :data:`REPLIES`, removed (``None``: none
    with that id and prompt token count; :meth:`phaseaware.integrate.ReplyStore.take`)."""
    return REPLIES.take(reply_id, prompt_tokens=prompt_tokens)


def _hooks(given: Mapping[str, Sequence[Any]] | None, hook: Any) -> dict[str, list[Any]]:
    hooks = {name: list(fns) for name, fns in (given or {}).items()}
    hooks["response"] = [*hooks.get("response", []), hook]
    return hooks


def prompt_ids_clients(**httpx_args: Any) -> dict[str, Any]:
    """``http_client`` and ``http_async_client`` for ``ChatOpenAI(...)`` (``**`` them in),
    with ``openai``'s defaults and the reply hooks. ``httpx_args`` go to both clients
    (``event_hooks`` given there run first)."""
    import openai  # langchain-openai's own dependency: loaded only when clients are made

    given = httpx_args.pop("event_hooks", None)
    return {
        "http_client": openai.DefaultHttpxClient(
            event_hooks=_hooks(given, record_reply), **httpx_args
        ),
        "http_async_client": openai.DefaultAsyncHttpxClient(
            event_hooks=_hooks(given, arecord_reply), **httpx_args
        ),
    }


def reply_body(bodies: Sequence[Mapping[str, Any]], reply_id: object) -> Mapping[str, Any] | None:
    """The captured body the reply came from: the one with the reply's response ``id``
    (``ChatOpenAI`` keeps it in ``response_metadata["id"]``), else, when the reply has
    no id, the last one; ``None``: none captured (or none with that id)."""
    if isinstance(reply_id, str):
        return next((b for b in reversed(bodies) if b.get("id") == reply_id), None)
    return bodies[-1] if bodies else None
