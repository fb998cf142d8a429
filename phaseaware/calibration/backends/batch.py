"""Offline calibration through batch files (OpenAI Batch API, ``vllm run-batch``).

:func:`emit_batch` writes one request per probe as JSONL::

    {"custom_id": <probe_id>, "method": "POST", "url": "/v1/chat/completions",
     "body": {"model": ..., "messages": [...], "max_tokens": ..., "temperature": 0}}

(``"/v1/completions"`` with ``"prompt"`` for the completions endpoint).
:func:`read_batch_results` reads the output file, whose lines come in any
order::

    {"id": ..., "custom_id": ..., "response": {"status_code": 200, "body": {...}},
     "error": null}

and returns completions by ``custom_id`` plus every line that could not be
used (bad JSON, HTTP error, missing fields, prompt-token mismatch), never
dropping one silently. :func:`ingest_batch` is the strict form: it raises
one ``BackendError`` that summarizes all problems. Each line's
``usage.prompt_tokens`` follows the HTTP backend's rule
(:func:`~phaseaware.calibration.backends.base.prompt_token_mismatch`).

:class:`ReplayBackend` hands completions read from a results file to the
runner, so batch results are logged and judged exactly like live answers.
"""

from __future__ import annotations

import json
import os
from collections.abc import Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from phaseaware.atomic import atomic_write_text
from phaseaware.calibration.backends.base import (
    Completion,
    ProbeRequest,
    prompt_token_mismatch,
)
from phaseaware.errors import BackendError, InputError
from phaseaware.userfiles import LARGE_FILE, jsonl_lines, read_user_text

__all__ = [
    "BATCH_BACKEND",
    "ENDPOINT_URLS",
    "ReplayBackend",
    "BatchLineError",
    "BatchResults",
    "batch_request_line",
    "emit_batch",
    "read_batch_results",
    "ingest_batch",
]

BATCH_BACKEND = "openai-batch"  # the backend name batch runs log under
ENDPOINT_URLS: Mapping[str, str] = {
    "chat": "/v1/chat/completions",
    "completions": "/v1/completions",
}
_SHOWN_ERRORS = 5


@dataclass(frozen=True)
class BatchLineError:
    """A result line that gave no completion. ``line`` counts from 1."""

    line: int
    custom_id: str | None
    message: str


@dataclass(frozen=True)
class BatchResults:
    """``completions`` by custom_id; ``errors`` per unusable line; ``missing``:
    ids of the expected requests that have no line at all (sorted)."""

    completions: Mapping[str, Completion]
    errors: tuple[BatchLineError, ...]
    missing: tuple[str, ...]

    @property
    def ok(self) -> bool:
        return not self.errors and not self.missing


class ReplayBackend:
    """A backend that replays ``completions`` (by probe id) read from a batch results file.

    Probes without a completion get none (the runner keeps them pending when told
    ``allow_missing``).
    """

    name: str = BATCH_BACKEND

    def __init__(self, completions: Mapping[str, Completion]) -> None:
        self.completions = dict(completions)
        self.model_info: dict[str, object] = {}

    def complete(self, group: Sequence[ProbeRequest]) -> Iterator[Completion]:
        return (self.completions[r.probe_id] for r in group if r.probe_id in self.completions)

    def close(self) -> None:
        return None


def batch_request_line(
    request: ProbeRequest,
    *,
    model: str,
    endpoint: str,
    chat_template_kwargs: Mapping[str, Any] | None = None,
) -> dict[str, Any]:
    """The batch input object for one probe (greedy: temperature 0); chat lines carry
    ``chat_template_kwargs`` when given (the settings the probes were rendered with)."""
    url = _url(endpoint)
    body: dict[str, Any] = {"model": model}
    if endpoint == "chat":
        if request.messages is None:
            raise BackendError(
                f"probe {request.probe_id} has no chat messages: use a chat layout "
                "(--chat-format) or emit plain prompts with --endpoint completions"
            )
        body["messages"] = [dict(m) for m in request.messages]
        if chat_template_kwargs is not None:
            body["chat_template_kwargs"] = dict(chat_template_kwargs)
    else:
        body["prompt"] = request.prompt
    body["max_tokens"] = request.max_tokens
    body["temperature"] = 0
    return {"custom_id": request.probe_id, "method": "POST", "url": url, "body": body}


def emit_batch(
    requests: Iterable[ProbeRequest],
    path: str | os.PathLike[str],
    *,
    model: str,
    endpoint: str = "chat",
    chat_template_kwargs: Mapping[str, Any] | None = None,
) -> int:
    """Write the batch input JSONL for ``requests`` to ``path`` atomically; return the line count.

    Probe ids become ``custom_id`` and must be unique. The file is replaced
    as a whole (readers never see half a file).
    """
    if not model:
        raise BackendError("--model is required: the model name the batch server serves")
    lines: list[str] = []
    seen: set[str] = set()
    for request in requests:
        if request.probe_id in seen:
            raise InputError(
                f"probe id {request.probe_id!r} occurs twice; batch custom_ids must be unique"
            )
        seen.add(request.probe_id)
        line = batch_request_line(
            request, model=model, endpoint=endpoint, chat_template_kwargs=chat_template_kwargs
        )
        lines.append(json.dumps(line, ensure_ascii=False))
    atomic_write_text(path, "".join(line + "\n" for line in lines))
    return len(lines)


def read_batch_results(
    path: str | os.PathLike[str],
    *,
    requests: Iterable[ProbeRequest] | None = None,
    prompt_token_offset: int = 0,
    check_prompt_tokens: bool = True,
) -> BatchResults:
    """Read a batch output file (lines in any order) into completions and errors.

    With ``requests``, each line's ``usage.prompt_tokens`` (when present and
    ``check_prompt_tokens``) must equal the request's ``prompt_tokens +
    prompt_token_offset``, unknown custom_ids are errors and absent ones are
    listed in ``missing``.
    """
    expected = {r.probe_id: r for r in requests} if requests is not None else None
    text = read_user_text(path, what="batch results", max_bytes=LARGE_FILE, error=BackendError)
    completions: dict[str, Completion] = {}
    errors: list[BatchLineError] = []
    for number, raw in enumerate(jsonl_lines(text), start=1):
        if not raw.strip():
            continue
        custom_id, outcome = _parse_line(raw)
        if isinstance(outcome, Completion):
            offset = prompt_token_offset if check_prompt_tokens else None
            outcome = _check(outcome, expected, offset, completions)
        if isinstance(outcome, str):
            errors.append(BatchLineError(number, custom_id, outcome))
        else:
            completions[outcome.probe_id] = outcome
    failed = {e.custom_id for e in errors}
    missing = () if expected is None else tuple(sorted(set(expected) - set(completions) - failed))
    return BatchResults(completions, tuple(errors), missing)


def ingest_batch(
    path: str | os.PathLike[str],
    *,
    requests: Iterable[ProbeRequest] | None = None,
    prompt_token_offset: int = 0,
) -> dict[str, Completion]:
    """Completions by custom_id; raises ``BackendError`` summarizing any bad or missing line.

    Use :func:`read_batch_results` to keep the good lines of a partly failed batch.
    """
    results = read_batch_results(path, requests=requests, prompt_token_offset=prompt_token_offset)
    if results.ok:
        return dict(results.completions)
    problems = [
        f"line {e.line} ({e.custom_id or 'no custom_id'}): {e.message}" for e in results.errors
    ]
    if results.missing:
        shown = ", ".join(results.missing[:_SHOWN_ERRORS])
        problems.append(f"{len(results.missing)} probe(s) have no result line ({shown}, ...)")
    more = len(problems) - _SHOWN_ERRORS
    summary = "; ".join(problems[:_SHOWN_ERRORS]) + (f"; and {more} more" if more > 0 else "")
    raise BackendError(
        f"batch results {path}: {len(results.completions)} usable, {len(results.errors)} bad "
        f"line(s), {len(results.missing)} missing: {summary}. Re-run the failed probes "
        "(emit a new batch for them) or use read_batch_results to keep the good lines"
    )


def _url(endpoint: str) -> str:
    if endpoint not in ENDPOINT_URLS:
        raise BackendError(f"--endpoint must be 'chat' or 'completions', got {endpoint!r}")
    return ENDPOINT_URLS[endpoint]


def _parse_line(raw: str) -> tuple[str | None, Completion | str]:
    """(custom_id, completion) or (custom_id, error message) for one output line."""
    try:
        item = json.loads(raw)
    except json.JSONDecodeError as exc:
        return None, f"not valid JSON ({exc.msg} at column {exc.colno}); is the file truncated?"
    if not isinstance(item, dict):
        return None, "not a JSON object"
    custom_id = item.get("custom_id")
    if not isinstance(custom_id, str) or not custom_id:
        return None, "no custom_id"
    error = item.get("error")
    if error:
        detail = error.get("message", error) if isinstance(error, dict) else error
        return custom_id, f"request failed: {detail}"
    response = item.get("response")
    if not isinstance(response, dict) or not isinstance(response.get("body"), dict):
        return custom_id, "no response body"
    body = response["body"]
    status = response.get("status_code", 200)
    if status != 200:
        detail = body.get("error", {}).get("message") if isinstance(body.get("error"), dict) else ""
        return custom_id, f"HTTP {status} {detail}".strip()
    return custom_id, _completion_from_body(custom_id, body)


def _completion_from_body(custom_id: str, body: Mapping[str, Any]) -> Completion | str:
    choices = body.get("choices")
    if not isinstance(choices, list) or not choices or not isinstance(choices[0], dict):
        return "response body has no choices"
    choice = choices[0]
    message = choice.get("message")
    text = message.get("content") if isinstance(message, dict) else choice.get("text")
    if text is not None and not isinstance(text, str):
        return "completion text is not a string"
    usage = body.get("usage")
    reported = usage.get("prompt_tokens") if isinstance(usage, dict) else None
    if reported is not None and (isinstance(reported, bool) or not isinstance(reported, int)):
        return f"usage.prompt_tokens is not an integer: {reported!r}"
    return Completion(custom_id, text or "", reported_prompt_tokens=reported)


def _check(
    completion: Completion,
    expected: Mapping[str, ProbeRequest] | None,
    offset: int | None,
    seen: Mapping[str, Completion],
) -> Completion | str:
    """``completion`` if usable, else why not; ``offset=None`` skips the token check."""
    previous = seen.get(completion.probe_id)
    if previous is not None and previous != completion:
        return "duplicate custom_id with a different result"
    if expected is None:
        return completion
    request = expected.get(completion.probe_id)
    if request is None:
        return "custom_id matches no probe of this run"
    if offset is not None:
        reported = completion.reported_prompt_tokens
        problem = prompt_token_mismatch(request, reported, offset, source="the batch server")
        if problem is not None:
            return problem
    return completion
