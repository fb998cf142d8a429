"""The server's own reply body, so the middleware and the callback can check the prompt id
for id.

**Why an httpx event hook.** vLLM returns the prompt's token ids for ``return_token_ids``
(``ChatCompletionResponse.prompt_token_ids``; on a stream, on the first chunk), SGLang for
``return_prompt_token_ids`` (on the first choice; never on a stream). ``langchain-openai``
1.8's ``ChatOpenAI`` drops both before anyone can see them. ``_create_chat_result`` builds
each ``AIMessage`` from the choice's ``message``, ``usage``, ``finish_reason`` and
``logprobs``, and ``llm_output`` from ``model``, ``system_fingerprint``, ``id`` and
``service_tier``; ``_convert_chunk_to_generation_chunk`` keeps even less of a chunk (not
its ``id``). No other field is kept, not even in ``response_metadata``.

The other routes do not help:

- ``include_response_headers`` carries headers only, and the ids are in the body.
- ``stream_usage`` carries the usage chunk's counts, not ids.
- A subclass overriding ``_create_chat_result`` would see the parsed response. That
  method is private (an underscore name, not a documented hook), so any release may
  change or remove it without notice.
- Patching ``langchain-openai`` at import time would change every user's ``ChatOpenAI``.

The public route is the one ``ChatOpenAI`` documents for the transport: its
``http_client`` / ``http_async_client`` arguments. httpx's documented response event hook
runs there, before the body is read. A JSON reply is read there (``response.read()``, as
httpx's docs say to). An event stream is not: the hook gives the response a byte stream
that hands each piece to the client unchanged and, on the way, to a
:class:`phaseaware.integrate.StreamedReply`, which keeps the first chunk's ids and the
usage chunk's counts (httpx itself wraps ``Response.stream`` the same way). The reply is
known when the client has read the stream to its end. :func:`prompt_ids_clients` builds
both clients, with ``openai``'s defaults (``DefaultHttpxClient``), and the hooks.

**Whose body.** The middleware opens :func:`capture` around its own model call. The
hooks run in the caller's thread (sync) or task (async), so a context variable brings
each reply into that call's capture and no other.

**A chain's callback.** ``PhaseAwareUsageCheck`` runs in no context of its own: a
callback's ``on_llm_end`` may run in another thread than the request (LangChain runs a
sync handler of an async call in an executor, in a copy of the call's context). A JSON
reply outside a capture is therefore kept in one small process-wide store keyed by the
response ``id`` (:class:`phaseaware.integrate.ReplyStore`: bounded, each reply taken once,
an id seen twice handed to nobody). The callback takes its reply's body by the ``id``
that ``ChatOpenAI`` keeps in ``response_metadata``. A stream has no such ``id`` at the
callback, and a reply inside the middleware's capture is the middleware's: the callback
then takes the one reply of its own context that arrived after its call started
(:func:`reply_mark`, :func:`take_reply`): in the capture, or among the last
:data:`STREAMS_KEPT` streams the context received outside one; only where its call asked
for the ids, and only with the call's own prompt token count. Calls of one context run
one after another; concurrent calls (``asyncio.gather``, ``batch``, parallel branches,
each step of a streamed chain) each run in a context of their own. Two replies after the
mark (model streams read in turns by hand in one task) are handed to nobody, and the
count is checked. What this cannot rule out: a call that asks for the ids through a client
without the hooks, read in turns with a hooked one in one task, started before the other's
reply came, and of the same prompt token count; it would compare the other call's ids
with its plan.

**Asking only where it helps.** :func:`delivers_replies` says whether a chat model's
client carries these hooks (the marker is the hook itself, in httpx's public
``event_hooks``). The middleware and ``PhaseAwarePrompt.model_kwargs(model)`` ask the
server for the ids only then, so a plain ``ChatOpenAI`` request carries no ids field.
"""

from __future__ import annotations

import contextlib
import contextvars
import itertools
import json
import threading
from collections.abc import AsyncIterator, Iterator, Mapping, Sequence
from typing import Any

import httpx

import phaseaware.integrate as kit

__all__ = [
    "REPLIES",
    "STREAMS_KEPT",
    "arecord_reply",
    "capture",
    "captured",
    "delivers_replies",
    "prompt_ids_clients",
    "record_reply",
    "reply_body",
    "reply_mark",
    "take_reply",
]

#: the JSON replies received outside a capture, by response id, for ``PhaseAwareUsageCheck``
REPLIES = kit.ReplyStore(name="langchain_phaseaware.replies")

#: the streams a context keeps (received outside a capture), newest last, for the callback
STREAMS_KEPT = 4

_ARRIVALS = itertools.count(1)  # one number per reply, in arrival order (atomic in CPython)
_LOCK = threading.Lock()


class _Reply:
    """One reply received through the hooks: its arrival number and, once read (a stream:
    at its end), what a check reads of it; a callback takes it at most once."""

    __slots__ = ("arrival", "kept", "read", "taken")

    def __init__(self, kept: kit.KeptReply | None = None) -> None:
        self.arrival: int = next(_ARRIVALS)
        self.kept: kit.KeptReply | None = kept
        self.read: bool = kept is not None
        self.taken: bool = False

    def finish(self, reader: kit.StreamedReply) -> None:
        with _LOCK:
            if not self.read:
                self.kept, self.read = reader.kept(), True


#: the current model call's replies (None: no call is capturing)
_CAPTURE: contextvars.ContextVar[list[_Reply] | None] = contextvars.ContextVar(
    "phaseaware_reply_capture", default=None
)
#: the last streams received in this context outside a capture
_STREAMS: contextvars.ContextVar[tuple[_Reply, ...]] = contextvars.ContextVar(
    "phaseaware_streamed_replies", default=()
)


@contextlib.contextmanager
def capture() -> Iterator[None]:
    """Keep the chat-completion replies received, through :func:`prompt_ids_clients`,
    while the block runs in this context, for :func:`captured`."""
    token = _CAPTURE.set([])
    try:
        yield
    finally:
        _CAPTURE.reset(token)


def captured() -> list[dict[str, Any]]:
    """What a check reads of each reply the innermost :func:`capture` of this context
    kept so far (a stream once read to its end): ``id``, ``model``, ``system_fingerprint``,
    ``usage`` and ``prompt_token_ids`` where the server sent them (a copy; empty outside
    a capture)."""
    return [r.kept.body() for r in _CAPTURE.get() or () if r.kept is not None]


def _kind(response: httpx.Response) -> str:
    """The content type of a 200 reply (``""`` for any other status)."""
    kind = response.headers.get("content-type", "") if response.status_code == 200 else ""
    return kind.split(";", 1)[0].strip()


def _arrived(reply: _Reply, *, stream: bool) -> None:
    """``reply`` joins this context's capture, else (a stream) its kept streams."""
    bodies = _CAPTURE.get()
    if bodies is not None:
        bodies.append(reply)
    elif stream:
        _STREAMS.set((*_STREAMS.get()[1 - STREAMS_KEPT :], reply))


def _keep(content: bytes) -> None:
    try:
        body = json.loads(content)
    except ValueError:
        return  # not JSON after all: the client reports it; there is nothing to check
    if not (isinstance(body, dict) and "choices" in body):
        return
    if _CAPTURE.get() is not None:
        _arrived(_Reply(kit.KeptReply.of(body)), stream=False)  # this call's capture
    else:
        REPLIES.keep(body)  # for a callback, by response id


class _ReadStream(httpx.SyncByteStream):
    """The response's byte stream, unchanged, read on the way by a ``StreamedReply``."""

    def __init__(self, inner: httpx.SyncByteStream, reply: _Reply) -> None:
        self._inner, self._reply = inner, reply

    def __iter__(self) -> Iterator[bytes]:
        reader = kit.StreamedReply()
        for piece in self._inner:
            reader.feed(piece)
            if reader.done:  # [DONE]: the reply is known before the client sees the end
                self._reply.finish(reader)
            yield piece
        reader.close()
        self._reply.finish(reader)

    def close(self) -> None:
        self._inner.close()


class _AsyncReadStream(httpx.AsyncByteStream):
    """:class:`_ReadStream` for the async client."""

    def __init__(self, inner: httpx.AsyncByteStream, reply: _Reply) -> None:
        self._inner, self._reply = inner, reply

    async def __aiter__(self) -> AsyncIterator[bytes]:
        reader = kit.StreamedReply()
        async for piece in self._inner:
            reader.feed(piece)
            if reader.done:
                self._reply.finish(reader)
            yield piece
        reader.close()
        self._reply.finish(reader)

    async def aclose(self) -> None:
        await self._inner.aclose()


def record_reply(response: httpx.Response) -> None:
    """httpx response hook (sync client): keep a chat reply for the :func:`capture` open
    in this context, else for a callback (a JSON body: :data:`REPLIES`; a stream: this
    context's kept streams, read as the client reads it)."""
    kind = _kind(response)
    if kind == "application/json":
        _keep(response.read())
    elif kind == "text/event-stream" and isinstance(response.stream, httpx.SyncByteStream):
        reply = _Reply()
        _arrived(reply, stream=True)
        response.stream = _ReadStream(response.stream, reply)


async def arecord_reply(response: httpx.Response) -> None:
    """httpx response hook (async client): as :func:`record_reply`."""
    kind = _kind(response)
    if kind == "application/json":
        _keep(await response.aread())
    elif kind == "text/event-stream" and isinstance(response.stream, httpx.AsyncByteStream):
        reply = _Reply()
        _arrived(reply, stream=True)
        response.stream = _AsyncReadStream(response.stream, reply)


def delivers_replies(model: object, *, asynchronous: bool) -> bool:
    """Whether ``model`` (a chat model) hands its reply bodies to phaseaware, streamed or
    not: its public ``http_client`` (``http_async_client`` for an async call) carries this
    module's hook (:func:`prompt_ids_clients`)."""
    client = getattr(model, "http_async_client" if asynchronous else "http_client", None)
    hooks = client.event_hooks.get("response", ()) if isinstance(client, _CLIENTS) else ()
    return (arecord_reply if asynchronous else record_reply) in hooks


_CLIENTS = (httpx.Client, httpx.AsyncClient)


def reply_mark() -> int:
    """A mark before a model call: the replies after it (:func:`take_reply`'s ``since``)
    arrived later (process-wide order)."""
    return next(_ARRIVALS)


def take_reply(
    reply_id: object, *, prompt_tokens: int | None, since: int | None = None
) -> dict[str, Any] | None:
    """The body of the reply to a callback's call, taken (``None``: none found that carries
    the prompt's ids and the call's own prompt token count). First the JSON reply
    ``reply_id`` kept in :data:`REPLIES` (:meth:`phaseaware.integrate.ReplyStore.take`);
    then, given ``since`` (:func:`reply_mark` at the call's start), the one reply of this
    context after it, in the open capture or among its kept streams (with ``reply_id``
    where the reply has one): none, or two, hand over nothing."""
    body = REPLIES.take(reply_id, prompt_tokens=prompt_tokens)
    if body is not None or since is None:
        return body
    replies: list[_Reply] = [*(_CAPTURE.get() or ()), *_STREAMS.get()]
    mine = [r for r in replies if r.arrival > since and _is(r, reply_id)]
    if len(mine) != 1:
        return None
    (reply,) = mine
    with _LOCK:
        kept: kit.KeptReply | None = reply.kept if not reply.taken else None
        reply.taken = True
    if kept is None or kept.ids is None or kept.prompt_tokens != prompt_tokens:
        return None
    return kept.body()


def _is(reply: _Reply, reply_id: object) -> bool:
    """Whether ``reply`` may be the one of id ``reply_id`` (``None``: a stream's, unknown)."""
    return reply_id is None or (reply.kept is not None and reply.kept.reply_id == reply_id)


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
    no id (a stream), the last one; ``None``: none captured (or none with that id)."""
    if isinstance(reply_id, str):
        return next((b for b in reversed(bodies) if b.get("id") == reply_id), None)
    return bodies[-1] if bodies else None
