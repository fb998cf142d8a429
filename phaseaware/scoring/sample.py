"""What a log reader hands the scorer: one sample's prompt, needle and verdict, or a skip.

Readers (one module per log format) only read; :mod:`phaseaware.scoring.locate`
finds the needle's token position; :mod:`phaseaware.scoring.tally` counts.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

__all__ = ["EvalSample", "Skip", "SKIP_REASONS"]

#: Why a sample is left out (every skip carries one of these).
SKIP_REASONS: tuple[str, ...] = (
    "bad-record",  # not a JSON object, or a field of the wrong type
    "no-prompt",  # the record holds no prompt the model saw
    "no-needle",  # the needle field is missing or empty
    "several-needles",  # more than one needle: which one decided the answer is unknown
    "no-verdict",  # the correctness field is missing or not a boolean/number
    "needle-absent",  # the needle text does not occur in the prompt
    "needle-ambiguous",  # the needle text occurs more than once
    "key-regex-no-match",  # --key-regex matched nothing inside the needle
    "truncated",  # the model saw fewer tokens than the log's prompt (harness or server cut it)
    "length-mismatch",  # the log's own token count disagrees with the tokenizer's
    "render-failed",  # the chat format refused the messages
    "server-tokens",  # the server's /tokenize ids do not round-trip through the tokenizer
    "duplicate",  # the same sample (doc_id and prompt) in another file of the same run: read once
    "prompt-cut",  # the harness logged a shortened copy of the prompt, not the prompt sent
)


@dataclass(frozen=True)
class EvalSample:
    """One graded prompt from an eval log.

    Exactly one of ``prompt`` (text sent as is, e.g. to a completions endpoint)
    and ``messages`` (a chat request, rendered by the chat format or the
    server) is set. ``needles`` are the needle strings the log names (one is
    scored; several are skipped). ``reported_tokens`` is the harness's own
    count of the prompt in tokens, when it logs one (a cross-check: it must equal
    the tokenizer's count). ``truncated`` is the harness's own flag that it cut
    the prompt.
    """

    sample_id: str
    prompt: str | None
    messages: tuple[dict[str, Any], ...] | None
    needles: tuple[str, ...]
    correct: bool
    reported_tokens: int | None = None
    truncated: bool = False


@dataclass(frozen=True)
class Skip:
    """A sample left out of the tally, with one of :data:`SKIP_REASONS` and a detail."""

    sample_id: str
    reason: str
    detail: str = ""
