"""A backend that wraps any Python function ``prompt -> answer``.

Use it to calibrate anything you can call from Python (a local pipeline, a
client library, a simulated model in tests)::

    from phaseaware.calibration.backends.callable import CallableBackend

    def ask(prompt: str) -> str:
        return my_model.generate(prompt)        # the full prompt text, template included

    backend = CallableBackend(ask, name="my-model")

``fn`` receives ``ProbeRequest.prompt`` (the exact text the tokenizer counted,
BOS/template included) and returns the completion text; the runner extracts the
first number as the answer. With ``pass_request=True`` it receives the whole
:class:`~phaseaware.calibration.backends.base.ProbeRequest` instead (to use
``messages`` for chat APIs). It may return a ``str`` or a
:class:`~phaseaware.calibration.backends.base.Completion` (to report an answer
log-probability). Any exception ``fn`` raises becomes a ``BackendError``
(``KeyboardInterrupt`` passes through so Ctrl-C stops the run).
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Mapping, Sequence
from typing import Any

from phaseaware.calibration.backends.base import Completion, ProbeRequest
from phaseaware.errors import BackendError

__all__ = ["CallableBackend"]


class CallableBackend:
    """Calls ``fn`` once per probe, in order. ``model_info``: facts about the model
    for the log header (e.g. ``{"local_window": 64}``)."""

    def __init__(
        self,
        fn: Callable[[Any], str | Completion],
        *,
        name: str = "callable",
        pass_request: bool = False,
        model_info: Mapping[str, Any] | None = None,
    ) -> None:
        if not callable(fn):
            raise TypeError(f"CallableBackend needs a callable, got {type(fn).__name__}")
        self.fn = fn
        self.name = name
        self.pass_request = pass_request
        self.model_info: dict[str, Any] = dict(model_info or {})

    def complete(self, group: Sequence[ProbeRequest]) -> Iterator[Completion]:
        for request in group:
            argument = request if self.pass_request else request.prompt
            try:
                result = self.fn(argument)
            except KeyboardInterrupt:
                raise
            except Exception as exc:
                raise BackendError(
                    f"backend {self.name!r} failed on probe {request.probe_id}: "
                    f"{type(exc).__name__}: {exc}; fix the function passed to CallableBackend"
                ) from exc
            if isinstance(result, Completion):
                yield Completion(
                    probe_id=request.probe_id,
                    text=result.text,
                    answer_logprob=result.answer_logprob,
                    reported_prompt_tokens=result.reported_prompt_tokens,
                )
            elif isinstance(result, str):
                yield Completion(probe_id=request.probe_id, text=result)
            else:
                raise BackendError(
                    f"backend {self.name!r} returned {type(result).__name__} for probe "
                    f"{request.probe_id}; the function must return a str (the completion)"
                )

    def close(self) -> None:
        return None
