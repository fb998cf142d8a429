"""What the OpenAI server serves: the engine protocol, and the reference model as an engine.

:class:`ServerEngine` is the one interface :mod:`phaseaware.reference.server` depends on
(chat template, token counting, greedy generation over prompt strings). An engine that also
satisfies :class:`BatchEngine` takes token ids instead: the server then tokenizes chat
messages through :meth:`BatchEngine.encode_chat` (the rendered chat, as vLLM tokenizes it) and
batches concurrent requests into one forward pass.

:class:`ReferenceEngine` serves the shipped reference model greedily, batched:

* **Padding on the right.** Positions are absolute from 0 (the model's compression windows
  are aligned to them), so left padding would move every token of the shorter prompts; the
  model is causal, so right padding never changes an earlier position, and each row's next
  token is read at its own last position. A row leaves the batch when it stops.
* **Rows join and leave.** ``generate_batch`` takes more rows from ``admit`` before each
  step and reports each row to ``done`` as it ends, so the server's queue feeds a running
  batch (continuous batching) instead of waiting for its longest row.
* **Bounded tokenizing.** Prompts are tokenized in pieces of about ``PIECE_CHARS``
  characters cut at whitespace (the tokenizer splits words at whitespace, so the pieces'
  tokens joined are the whole text's), taking the tokenizer lock once per piece, and
  tokenizing stops with :class:`ContextOverflow` once the prompt passes
  ``max_context_tokens``: a 262,144-character message costs a few pieces, not 131,072
  tokens, and other requests' short prompts pass between the pieces.
* **Control tokens, as a real server.** :meth:`ReferenceEngine.encode_chat` renders the
  chat template and tokenizes the rendered text with special-token strings active, wherever
  they stand, as vLLM 0.32 does (``renderers/base.py``: the Hugging Face tokenizer over the
  rendered prompt, ``add_special_tokens=False``, no ``split_special_tokens``): a message
  that says ``<|user|>`` or ``<eos>`` reaches the model as that marker, exactly as
  ``phaseaware score`` counts it. Keeping untrusted text from becoming a control token is
  the client's job (phaseaware's assembly breaks such strings before a request is sent:
  docs/untrusted-text.md), so a test against this server sees what a real one would make
  of a request. Raw ``/v1/completions`` prompts are tokenized the same way.

Token counts come from the model's own tokenizer, so ``usage.prompt_tokens`` is exact.
"""

from __future__ import annotations

import re
import threading
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol, runtime_checkable

from phaseaware.reference.paths import MODEL_NAME

__all__ = [
    "PIECE_CHARS",
    "BatchEngine",
    "ContextOverflow",
    "GenerationRequest",
    "GenerationResult",
    "PromptError",
    "ReferenceEngine",
    "ServerEngine",
    "text_pieces",
]


@dataclass(frozen=True)
class GenerationResult:
    """One greedy generation: ``text`` (decoded, stop sequence removed),
    ``completion_tokens`` (generated tokens), ``finish_reason`` (``"stop"`` or
    ``"length"``) and optional ``logprobs`` already in OpenAI's shape for the
    endpoint (passed through unchanged)."""

    text: str
    completion_tokens: int
    finish_reason: str = "stop"
    logprobs: Mapping[str, Any] | None = None


@dataclass(frozen=True)
class GenerationRequest:
    """One row of a batch: prompt ``ids`` (tokens), at most ``max_tokens`` new tokens,
    cut at the first of the ``stop`` strings. ``cancel``, once set (the client left, the
    server stops), lets an engine drop the row at its next step; its result is then unused."""

    ids: tuple[int, ...]
    max_tokens: int
    stop: tuple[str, ...] = ()
    cancel: threading.Event | None = field(default=None, compare=False, repr=False)

    @property
    def cancelled(self) -> bool:
        return self.cancel is not None and self.cancel.is_set()


class PromptError(ValueError):
    """The engine cannot serve these messages (e.g. a role its chat template refuses).

    The server answers it with 400 ``invalid_request_error`` on ``param="messages"``."""


class ContextOverflow(PromptError):
    """The prompt holds more than ``limit`` tokens; tokenizing stopped after ``tokens``
    (a lower bound of the prompt's length, greater than ``limit``).

    The server answers it with 400 ``context_length_exceeded``."""

    def __init__(self, tokens: int, limit: int) -> None:
        super().__init__(f"the prompt holds more than {limit} tokens (stopped at {tokens})")
        self.tokens = tokens
        self.limit = limit


PIECE_CHARS = 8192  # characters tokenized per tokenizer call (a piece ends before whitespace)
# White_Space as the tokenizer's pre-tokenizer (Rust char::is_whitespace) sees it: Python's
# \s less the four separators \x1c-\x1f, which str.isspace() counts and Rust does not
_WHITESPACE = re.compile(r"[^\S\x1c-\x1f]")


def text_pieces(text: str, size: int = PIECE_CHARS) -> Iterator[str]:
    """``text`` cut into pieces of at least ``size`` characters, each cut just before a
    whitespace character (the last piece may be shorter; a text without whitespace after
    ``size`` stays whole). ``"".join(pieces) == text``; lazily, so a caller that stops
    early never scans the rest."""
    start = 0
    while len(text) - start > size:
        found = _WHITESPACE.search(text, start + size)
        if found is None:
            break
        yield text[start : found.start()]
        start = found.start()
    yield text[start:]


Admit = Callable[[], Sequence[GenerationRequest]]
"""``admit()``: more rows to join a running batch (maybe none; the caller bounds them)."""
Done = Callable[[GenerationRequest, GenerationResult], None]
"""``done(request, result)``: a row has ended (called once per row, from the engine's thread)."""


@runtime_checkable
class ServerEngine(Protocol):
    """What the server needs from a model.

    ``render_chat`` applies the chat template and returns the full prompt text
    (BOS included) that ``count_tokens`` and ``generate`` take. Engines may
    set ``max_context_tokens`` (int) to have over-long prompts rejected.
    The server calls ``generate`` from several threads unless started with
    ``engine_parallelism=1`` (the default), which serializes calls.
    """

    model_name: str

    def render_chat(self, messages: Sequence[Mapping[str, str]]) -> str: ...

    def count_tokens(self, prompt: str) -> int: ...

    def generate(
        self, prompt: str, *, max_tokens: int, temperature: float, stop: tuple[str, ...]
    ) -> GenerationResult: ...


@runtime_checkable
class BatchEngine(ServerEngine, Protocol):
    """Optional capability: token-level prompts and batched greedy generation.

    ``generate_batch`` may call ``admit()`` between steps for more rows to run
    alongside (continuous batching: a short request need not wait for a long
    one to end), and must then report each admitted row through ``done`` when it ends
    (``done`` may also report the given rows early; the returned list covers only them).
    An engine that never calls ``admit`` serves as before. ``encode_chat`` tokenizes the
    rendered chat as a server does (control-token text in a message's content included); it
    and ``encode_prompt`` may raise :class:`ContextOverflow` instead of tokenizing a prompt
    past ``max_context_tokens`` to its end;
    ``generate_batch`` returns one result per request, in order, each identical to what
    the request would get alone. The server calls it from one thread at a time.
    """

    max_context_tokens: int

    def encode_prompt(self, prompt: str) -> list[int]: ...

    def encode_chat(self, messages: Sequence[Mapping[str, str]]) -> list[int]: ...

    def generate_batch(
        self,
        requests: Sequence[GenerationRequest],
        *,
        admit: Admit | None = None,
        done: Done | None = None,
    ) -> list[GenerationResult]: ...


class ReferenceEngine:
    """Serve ``model``/``tokenizer`` (from :func:`load_reference`) greedily, batched.

    Thread-safe: tokenizer calls share one lock, forward passes another. ``piece_chars``: characters of a
    prompt tokenized per call (and per hold of the lock).
    """

    def __init__(
        self,
        model: Any,
        tokenizer: Any,
        *,
        model_name: str = MODEL_NAME,
        piece_chars: int = PIECE_CHARS,
    ) -> None:
        if piece_chars < 1:
            raise ValueError(f"piece_chars must be >= 1, got {piece_chars}")
        self.model = model
        self.tokenizer = tokenizer
        self.model_name = model_name
        self.max_context_tokens = int(model.config.max_position_embeddings)
        self.piece_chars = piece_chars  # characters per tokenizer call (see text_pieces)
        self._pad_id = int(tokenizer.pad_token_id)
        self._eos_id = int(tokenizer.eos_token_id)
        self._model_lock = threading.Lock()
        self._tokenizer_lock = threading.Lock()

    def render_chat(self, messages: Sequence[Mapping[str, str]]) -> str:
        """The chat template's text for ``messages`` (generation prompt added)."""
        try:
            text = self.tokenizer.apply_chat_template(
                [dict(m) for m in messages], tokenize=False, add_generation_prompt=True
            )
        except Exception as exc:  # jinja raise_exception: unsupported role
            raise PromptError(str(exc)) from exc
        return str(text)

    def encode(self, prompt: str) -> list[int]:
        """Token ids of a raw prompt, special-token strings active (no BOS added)."""
        with self._tokenizer_lock:
            return [int(i) for i in self.tokenizer(prompt, add_special_tokens=False)["input_ids"]]

    def encode_prompt(self, prompt: str) -> list[int]:
        """:meth:`encode`, piece by piece; raises :class:`ContextOverflow` as soon as the
        prompt passes ``max_context_tokens`` (the rest is never tokenized)."""
        ids: list[int] = []
        for piece in text_pieces(prompt, self.piece_chars):
            ids += self.encode(piece)
            self._within_context(len(ids))
        return ids

    def _within_context(self, tokens: int) -> None:
        if tokens > self.max_context_tokens:
            raise ContextOverflow(tokens, self.max_context_tokens)

    def count_tokens(self, prompt: str) -> int:
        return len(self.encode(prompt))

    def encode_chat(self, messages: Sequence[Mapping[str, str]]) -> list[int]:
        """Token ids of the chat prompt: :meth:`encode_prompt` of :meth:`render_chat`.

        The rendered text is tokenized as vLLM tokenizes it, special-token strings active
        wherever they stand (a message's content included), so ``usage.prompt_tokens`` and
        every position equal what ``phaseaware score --chat-format hf`` counts. Raises
        :class:`ContextOverflow` as soon as the prompt passes ``max_context_tokens``: the
        rest is never tokenized.
        """
        return self.encode_prompt(self.render_chat(messages))

    def generate(
        self, prompt: str, *, max_tokens: int, temperature: float, stop: tuple[str, ...]
    ) -> GenerationResult:
        """Greedy continuation (``temperature`` is ignored), cut at ``<eos>`` or a stop string.

        ``logprobs`` is not reported (the server answers ``null``).
        """
        request = GenerationRequest(tuple(self.encode(prompt)), max_tokens, stop)
        return self.generate_batch([request])[0]

    def generate_batch(
        self,
        requests: Sequence[GenerationRequest],
        *,
        admit: Admit | None = None,
        done: Done | None = None,
    ) -> list[GenerationResult]:
        """Greedy continuations of every request in one forward pass per step.

        Rows are right-padded with ``<pad>`` (positions are absolute, so a row's tokens
        never depend on the others: each equals its request alone); a row stops at
        ``<eos>``, at one of its stop strings, after its ``max_tokens``, at the context
        limit or once cancelled, and then leaves the batch (reported to ``done``). Before
        each step, ``admit`` may add rows.
        """
        import torch

        rows_in = list(requests)
        new: list[list[int]] = [[] for _ in rows_in]
        finish = ["length"] * len(rows_in)
        active = list(range(len(rows_in)))
        limit = self.max_context_tokens  # tokens, prompt and completion together
        reported: set[int] = set()

        def leave(i: int) -> None:
            if done is not None and i not in reported:
                reported.add(i)
                done(rows_in[i], self._result(rows_in[i], new[i], finish[i]))

        with self._model_lock, torch.no_grad():
            while True:
                if admit is not None:
                    for joiner in admit():
                        rows_in.append(joiner)
                        new.append([])
                        finish.append("length")
                        active.append(len(rows_in) - 1)
                kept = [
                    i
                    for i in active
                    if rows_in[i].max_tokens > len(new[i])
                    and len(rows_in[i].ids) + len(new[i]) < limit
                    and not rows_in[i].cancelled
                ]
                for i in set(active) - set(kept):
                    leave(i)
                active = kept
                if not active:
                    break
                tokens = self._next_tokens([list(rows_in[i].ids) + new[i] for i in active])
                still: list[int] = []
                for i, token in zip(active, tokens, strict=True):
                    if self._step(rows_in[i], new[i], token):
                        finish[i] = "stop"
                        leave(i)
                    else:
                        still.append(i)
                active = still
        given = range(len(requests))
        return [self._result(rows_in[i], new[i], finish[i]) for i in given]

    def _next_tokens(self, rows: list[list[int]]) -> list[int]:
        """The greedy next token of each row. Rows of similar length share a forward pass
        (right-padded); a row more than twice as long (plus 16) starts another, so a short
        row never pays for a long row's width."""
        order = sorted(range(len(rows)), key=lambda n: len(rows[n]))
        tokens = [0] * len(rows)
        group: list[int] = []
        for n in order:
            if group and len(rows[n]) > 2 * len(rows[group[0]]) + 16:
                self._forward(rows, group, tokens)
                group = []
            group.append(n)
        self._forward(rows, group, tokens)
        return tokens

    def _forward(self, rows: list[list[int]], group: list[int], tokens: list[int]) -> None:
        import torch

        lengths = torch.tensor([len(rows[n]) for n in group])
        x = torch.full((len(group), int(lengths.max())), self._pad_id, dtype=torch.long)
        for k, n in enumerate(group):
            x[k, : len(rows[n])] = torch.tensor(rows[n], dtype=torch.long)
        logits = self.model(x.to(self.model.device)).logits
        last = logits[torch.arange(len(group)), lengths.to(logits.device) - 1]
        for n, token in zip(group, last.argmax(dim=-1).tolist(), strict=True):
            tokens[n] = int(token)

    def _step(self, request: GenerationRequest, new: list[int], token: int) -> bool:
        """Append ``token`` to ``new``; whether the row stops here (eos or a stop string)."""
        if token == self._eos_id:
            return True
        new.append(token)
        return bool(request.stop) and any(s and s in self._decode(new) for s in request.stop)

    def _decode(self, ids: list[int]) -> str:
        with self._tokenizer_lock:
            return str(self.tokenizer.decode(ids, skip_special_tokens=True))

    def _result(self, request: GenerationRequest, new: list[int], finish: str) -> GenerationResult:
        text = self._decode(new)
        for s in request.stop:
            if s and s in text:
                text = text[: text.index(s)]
        return GenerationResult(text=text, completion_tokens=len(new), finish_reason=finish)
