"""A chat-completion event stream, read as it passes, for the usage check.

A streamed reply's prompt ids come on its first chunk: vLLM 0.32 answers a streamed
request that states ``return_token_ids`` with ``prompt_token_ids`` on the first chunk
("return prompt_token_ids at the first chunk ever",
``vllm/entrypoints/openai/chat_completion/serving.py``; the field is
``ChatCompletionStreamResponse.prompt_token_ids`` in ``.../chat_completion/protocol.py``),
the usage on the last chunk (``stream_options.include_usage``) and the
``system_fingerprint`` on the final one. SGLang refuses the request field on a stream
(:data:`phaseaware.endpoints.PROMPT_IDS_NOT_STREAMED`), so its streams carry none.

A client that reads the stream for its own ends (LangChain's ``ChatOpenAI``) keeps none
of this. :class:`StreamedReply` is fed the raw bytes as they pass (an adapter's transport
hook) and parses the server-sent events by the rules the ``openai`` client follows:
lines end in LF or CRLF, ``data:`` fields of one event are joined by LF, a blank line ends
the event, ``[DONE]`` ends the stream. What it keeps is what a check reads of a body
(:class:`~phaseaware.integrate.replies.KeptReply`): the first ``id`` and ``model``, the
first prompt ids, the last ``usage`` and ``system_fingerprint``.

Bounded: an event longer than ``max_event_bytes`` (the first chunk's ids, as JSON: about
7 bytes a token) stops the reading (:attr:`StreamedReply.overflowed`) and the reply has
no ids (the check is then by count). Only the first event and events that name
``usage`` or ``system_fingerprint`` are parsed, so a long answer costs a substring test
per chunk.
"""

from __future__ import annotations

import json
from typing import Any

from phaseaware.integrate.replies import KeptReply

__all__ = ["StreamedReply"]

_DONE = b"[DONE]"
_LATER_FIELDS = (b'"usage"', b'"system_fingerprint"')  # what a later chunk may add


class StreamedReply:
    """The body an OpenAI-style chat-completion event stream amounts to for a usage check
    (the module docstring). Feed it the stream's bytes in order (:meth:`feed`), then
    :meth:`close` at the end; :meth:`kept` is the reply (``None``: no chunk read, or the
    reading overflowed). Not thread-safe: one stream, one reader."""

    def __init__(self, *, max_event_bytes: int = 32 << 20) -> None:
        self.max_event_bytes = max_event_bytes
        self.done = False  # [DONE] seen, or closed
        self.overflowed = False
        self._pending = bytearray()  # bytes of lines not yet ended
        self._data: list[bytes] = []  # the current event's data fields
        self._size = 0  # bytes in the current event
        self._chunks = 0  # events parsed as chunks
        self._head: dict[str, Any] = {}
        self._ids: Any = None

    def feed(self, data: bytes) -> None:
        """The next bytes of the stream (any split: an event may span calls)."""
        if self.done or self.overflowed:
            return
        scanned = len(self._pending)  # no line ends before: a long line is scanned once
        self._pending += data
        start = 0
        while not self.done and not self.overflowed:
            end = self._pending.find(b"\n", max(start, scanned))
            if end < 0:
                break
            self._line(bytes(self._pending[start:end]).removesuffix(b"\r"))
            start = end + 1
        del self._pending[:start]
        if len(self._pending) + self._size > self.max_event_bytes:
            self._overflow()

    def close(self) -> None:
        """The stream ended (a last event without its blank line is read)."""
        if not (self.done or self.overflowed):
            if self._pending:
                self._line(bytes(self._pending).removesuffix(b"\r"))
            self._event()
        self.done = True
        self._pending.clear()

    def kept(self) -> KeptReply | None:
        """What a check reads of the reply so far (``None``: nothing, or it overflowed)."""
        if self.overflowed or not self._chunks:
            return None
        ids = {"prompt_token_ids": self._ids} if self._ids is not None else {}
        return KeptReply.of({**self._head, **ids})

    def _overflow(self) -> None:
        self.overflowed = True
        self._pending.clear()
        self._data.clear()

    def _line(self, line: bytes) -> None:
        if not line:
            self._event()
        elif line.startswith(b"data:"):
            value = line[5:]
            value = value[1:] if value.startswith(b" ") else value
            self._data.append(value)
            self._size += len(value) + 1
            if self._size > self.max_event_bytes:
                self._overflow()
        # other fields (event:, id:, retry:) and comments (":") carry nothing a check reads

    def _event(self) -> None:
        data, self._data, self._size = b"\n".join(self._data), [], 0
        if not data:
            return
        if data.strip() == _DONE:
            self.done = True
            return
        if self._chunks and not any(name in data for name in _LATER_FIELDS):
            self._chunks += 1
            return
        try:
            chunk = json.loads(data)
        except ValueError:
            return  # not a chunk: the client reports what it cannot read
        if isinstance(chunk, dict) and "choices" in chunk:  # a chat-completion chunk
            self._chunk(chunk)

    def _chunk(self, chunk: dict[str, Any]) -> None:
        first = not self._chunks
        self._chunks += 1
        for name in ("id", "model"):
            if first and name in chunk:
                self._head[name] = chunk[name]
        for name in ("usage", "system_fingerprint"):
            if chunk.get(name) is not None:
                self._head[name] = chunk[name]
        if self._ids is None:
            ids = chunk.get("prompt_token_ids")
            choices = chunk.get("choices")
            if ids is None and isinstance(choices, list) and choices:
                choice = choices[0]
                ids = choice.get("prompt_token_ids") if isinstance(choice, dict) else None
            self._ids = ids
