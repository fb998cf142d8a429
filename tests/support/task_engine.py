"""A model-free engine that answers the retrieval task by looking facts up.

:class:`TaskLookupEngine` reads the last question of the prompt (``What is
the access code for <name> ?``), finds the record ``The access code for
<name> is <number> .`` in the prompt and answers ``<number>``. Served by
:func:`tests.support.fault_server.start_server` it stands in for a
model when testing HTTP clients, calibration runs and batch pipelines: the
answers depend on the probe, everything around them (HTTP, client, logs) is
real. ``miss`` makes chosen probes fail (e.g. by key position, to simulate
phase effects); the engine records its calls and peak concurrency.
"""

from __future__ import annotations

import re
import threading
import time
from collections.abc import Callable, Mapping, Sequence
from typing import Any

from phaseaware.reference.engine import GenerationRequest, GenerationResult

__all__ = ["BatchLookupEngine", "TaskLookupEngine", "word_count", "simple_chat_template"]

_QUESTION = re.compile(r"What is the access code for (\S+) \?")


def word_count(prompt: str) -> int:
    """Default token count: whitespace-separated words (a word-level tokenizer)."""
    return len(prompt.split())


def simple_chat_template(messages: Sequence[Mapping[str, str]]) -> str:
    """Default chat template: ``<bos> <user> ... <assistant>`` (word-level tokens)."""
    parts = ["<bos>"]
    for message in messages:
        parts.append(f"<{message['role']}> {message['content']}")
    parts.append("<assistant>")
    return " ".join(parts)


class TaskLookupEngine:
    """Answers task questions from the records in the prompt (a test double for a model).

    ``count_tokens`` and ``chat_template`` default to :func:`word_count` and
    :func:`simple_chat_template`; ``delay_s`` is slept inside every
    ``generate`` call (seconds) so concurrency becomes observable;
    ``miss(prompt, name) -> bool`` makes a probe answer ``unknown``.
    Thread-safe; ``prompts`` lists generate calls in order of arrival.
    """

    def __init__(
        self,
        *,
        model_name: str = "phaseaware-task-lookup",
        count_tokens: Callable[[str], int] = word_count,
        chat_template: Callable[[Sequence[Mapping[str, str]]], str] = simple_chat_template,
        delay_s: float = 0.0,
        miss: Callable[[str, str], bool] | None = None,
        max_context_tokens: int | None = None,
    ) -> None:
        self.model_name = model_name
        self.max_context_tokens = max_context_tokens
        self._count = count_tokens
        self._template = chat_template
        self._delay_s = delay_s
        self._miss = miss
        self._lock = threading.Lock()
        self._prompts: list[str] = []
        self._in_flight = 0
        self._max_in_flight = 0

    @property
    def prompts(self) -> list[str]:
        """Prompts passed to ``generate``, in order of arrival (a copy)."""
        with self._lock:
            return list(self._prompts)

    @property
    def max_in_flight(self) -> int:
        """Most ``generate`` calls that ran at the same time."""
        with self._lock:
            return self._max_in_flight

    def render_chat(self, messages: Sequence[Mapping[str, str]]) -> str:
        return self._template(messages)

    def count_tokens(self, prompt: str) -> int:
        return int(self._count(prompt))

    def generate(
        self, prompt: str, *, max_tokens: int, temperature: float, stop: tuple[str, ...]
    ) -> GenerationResult:
        with self._lock:
            self._prompts.append(prompt)
            self._in_flight += 1
            self._max_in_flight = max(self._max_in_flight, self._in_flight)
        try:
            if self._delay_s > 0:
                time.sleep(self._delay_s)
            return self._answer(prompt, max_tokens=max_tokens, stop=stop)
        finally:
            with self._lock:
                self._in_flight -= 1

    def _answer(self, prompt: str, *, max_tokens: int, stop: tuple[str, ...]) -> GenerationResult:
        questions = _QUESTION.findall(prompt)
        answer = "unknown"
        if questions:
            name = questions[-1]
            record = re.search(rf"The access code for {re.escape(name)} is (\S+) \.", prompt)
            if record and not (self._miss and self._miss(prompt, name)):
                answer = record.group(1)
        text = f" {answer} ."
        for s in stop:
            cut = text.find(s)
            if cut >= 0:
                text = text[:cut]
        words = text.split()
        finish = "stop"
        if len(words) > max_tokens:
            words, finish = words[:max_tokens], "length"
            text = " " + " ".join(words)
        return GenerationResult(text=text, completion_tokens=len(words), finish_reason=finish)


class BatchLookupEngine(TaskLookupEngine):
    """A :class:`TaskLookupEngine` with the batch capability (word ids, one "pass" per batch).

    ``delay_s`` is slept once per ``generate_batch`` call, as one forward pass would take
    (``steps`` times, as a generation of ``steps`` tokens would, leaving early once every
    row is cancelled); ``batch_sizes`` lists the rows of each call, in order, and
    ``cancelled_calls`` the calls that ended early because of cancellation.
    """

    def __init__(self, *, steps: int = 1, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self._steps = steps
        self.cancelled_calls = 0
        self.max_context_tokens = kwargs.get("max_context_tokens") or 1_000_000
        self._vocab: dict[str, int] = {}
        self.batch_sizes: list[int] = []

    def encode_prompt(self, prompt: str) -> list[int]:
        with self._lock:
            return [self._vocab.setdefault(w, len(self._vocab)) for w in prompt.split()]

    def encode_chat(self, messages: Sequence[Mapping[str, str]]) -> list[int]:
        return self.encode_prompt(self.render_chat(messages))

    def generate_batch(
        self,
        requests: Sequence[GenerationRequest],
        *,
        admit: Any = None,
        done: Any = None,
    ) -> list[GenerationResult]:
        """One call, one batch: never admits rows once started (the contract allows it)."""
        with self._lock:
            self.batch_sizes.append(len(requests))
            words = {i: w for w, i in self._vocab.items()}
        for _ in range(self._steps):
            if all(r.cancelled for r in requests):
                with self._lock:
                    self.cancelled_calls += 1
                return [GenerationResult("", 0, "length") for _ in requests]
            if self._delay_s > 0:
                time.sleep(self._delay_s)
        prompts = [" ".join(words[i] for i in r.ids) for r in requests]
        with self._lock:
            self._prompts.extend(prompts)
        return [
            self._answer(p, max_tokens=r.max_tokens, stop=r.stop)
            for p, r in zip(prompts, requests, strict=True)
        ]
