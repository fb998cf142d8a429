"""The backend interface every calibration backend implements.

A backend receives *groups* of probes: all residue variants of one base prompt,
which share a long prefix. Sending a group back to back lets local KV reuse and
server-side prefix caches work. Backends return raw completions; judging a
completion against the expected answer is the runner's job (``probes.judge``).
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from typing import Protocol, runtime_checkable

from phaseaware.endpoints.usage import check_prompt_tokens

__all__ = [
    "API_KEY_ENV_VARS",
    "ProbeRequest",
    "Completion",
    "Backend",
    "bad_token_count",
    "prompt_token_mismatch",
]

# Where an HTTP backend's API key may come from, in order. The calibration log
# refuses to store the value of any of them.
API_KEY_ENV_VARS: tuple[str, ...] = ("PHASEAWARE_API_KEY", "OPENAI_API_KEY")


@dataclass(frozen=True)
class ProbeRequest:
    """One prompt to send.

    ``prompt`` is the full text the tokenizer sees (BOS/template included) and
    ``prompt_tokens`` its locally computed length in tokens. ``messages`` is set
    for chat layouts (what a chat endpoint should receive instead of ``prompt``).
    ``answer`` is the expected answer text; backends that score log-likelihood
    use it, generation backends ignore it. ``max_tokens`` bounds generation.
    """

    probe_id: str
    prompt: str
    prompt_tokens: int
    answer: str
    messages: tuple[dict[str, str], ...] | None = None
    max_tokens: int = 8


@dataclass(frozen=True)
class Completion:
    """What the model produced for one probe.

    ``text``: the greedy completion. ``answer_logprob``: total log-probability
    (natural log) of ``answer`` given the prompt, when the backend can score it.
    ``reported_prompt_tokens``: the server's ``usage.prompt_tokens`` (HTTP).
    """

    probe_id: str
    text: str
    answer_logprob: float | None = None
    reported_prompt_tokens: int | None = None


@runtime_checkable
class Backend(Protocol):
    name: str

    def complete(self, group: Sequence[ProbeRequest]) -> Iterator[Completion]:
        """Complete every request of ``group`` (variants of one base prompt).

        Yields one Completion per request, in any order, as each finishes, so
        the runner can log it at once. Raises ``BackendError`` with a fix.
        """
        ...

    def close(self) -> None:
        """Release connections/threads/models."""
        ...


def bad_token_count(reported: object, *, source: str, probe_id: str) -> str | None:
    """Why ``reported`` (a server's ``usage.prompt_tokens``) is no token count at all (NaN,
    a float, a string, negative, beyond any context), or ``None`` for a usable one
    (absent, or an integer in [0, MAX_TOKENS])."""
    from phaseaware.limits import MAX_TOKENS

    if reported is None or (type(reported) is int and 0 <= reported <= MAX_TOKENS):
        return None  # (a bool is no count: type() is not isinstance())
    if type(reported) is int and reported > MAX_TOKENS:
        shown = f"an integer of {len(str(reported))} digits"
    else:
        shown = repr(reported)[:40]
    return (
        f"{source} reported usage.prompt_tokens = {shown} for probe {probe_id}, which is not "
        f"a token count (an integer in [0, {MAX_TOKENS}]): the server's answer is broken; "
        "check --base-url and the server"
    )


def prompt_token_mismatch(
    request: ProbeRequest, reported: int | None, offset: int, *, source: str
) -> str | None:
    """Why the server's ``usage.prompt_tokens`` (``reported``) disproves phaseaware's count,
    or ``None`` when it confirms it.

    The one rule, for HTTP answers and batch result lines alike: ``reported`` must be
    present and equal ``request.prompt_tokens + offset`` (``offset``: tokens the
    server adds itself, e.g. 1 for a BOS). ``source`` names the server or file.
    """
    if reported is None:
        return (
            f"{source} reported no usage.prompt_tokens for probe {request.probe_id}, so "
            "phaseaware cannot confirm the server saw the same tokens; use a server that "
            "reports usage, or disable the check (--no-prompt-token-check) at your own risk"
        )
    bad = bad_token_count(reported, source=source, probe_id=request.probe_id)
    if bad is not None:
        return bad
    check = check_prompt_tokens(
        planned_tokens=request.prompt_tokens,
        reported_tokens=int(reported),
        offset=offset,
        on_mismatch="ignore",
    )
    if check.ok:
        return None
    shown = f"{request.prompt_tokens}" + (f" (+{offset} offset)" if offset else "")
    return (
        f"server counted {reported} prompt tokens for probe {request.probe_id}, phaseaware "
        f"counted {shown}: wrong --tokenizer or --chat-format? If the server adds BOS itself, "
        "pass --prompt-token-offset with the difference (positions then shift by it too; "
        f"observed offset {check.observed_offset}, or run `phaseaware probe-endpoint`)"
    )
