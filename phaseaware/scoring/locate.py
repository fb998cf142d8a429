"""Where a sample's needle sat in the exact prompt the model saw, in tokens (BOS = 0).

The prompt text is the one the model saw: a text prompt as logged, a chat
request rendered by the named chat format (BOS and markers included), or the
server's own ``/tokenize`` ids decoded and re-tokenized (they must round-trip).
The needle's *character* span is found by string search in that text (exactly
one occurrence, else the sample is skipped); its *token* position comes only from
the tokenizer's offsets (:meth:`TokenizedText.token_at_char`), never from
character arithmetic.

The key token is the needle's first token, the token that holds the needle's
first character, as ``phaseaware calibrate`` defines its keys (the first token of
the asked record's name); ``key_regex`` picks another span inside the needle
(its first group, or the whole match), whose first token is then the key.

A text prompt sent to a completions endpoint gets the server's BOS in front:
``bos="auto"`` counts one when the tokenizer has a BOS and the prompt does not
already start with its text, ``"always"`` counts one in every case (servers that
add one regardless), ``"none"`` counts none (servers that add nothing). A chat
prompt's BOS comes from its template and is counted as rendered.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

from phaseaware.chat.formats import ChatFormat
from phaseaware.chat.messages import parse_messages
from phaseaware.endpoints.values import decode_server_ids
from phaseaware.errors import EndpointError, PhaseawareError
from phaseaware.regexes import UntrustedPattern, compile_untrusted
from phaseaware.scoring.sample import EvalSample, Skip
from phaseaware.tokenizers.base import Tokenizer

__all__ = ["BOS_RULES", "Located", "Locator", "locate"]

BOS_RULES: tuple[str, ...] = ("auto", "always", "none")

#: ``server_ids(messages) -> token ids`` the server renders for a chat request.
ServerTokenizer = Callable[[Sequence[dict[str, Any]]], list[int]]


@dataclass(frozen=True)
class Located:
    """A scored sample: its key token's absolute position and the prompt's length (tokens)."""

    sample_id: str
    key_position: int
    prompt_tokens: int
    correct: bool


@dataclass(frozen=True)
class Locator:
    """How prompts become tokens: the tokenizer, the chat format for message prompts (or the
    server's tokenizer), the BOS rule for text prompts, and the key span inside the needle."""

    tokenizer: Tokenizer
    chat_format: ChatFormat | None = None
    server_ids: ServerTokenizer | None = None
    bos: str = "auto"
    key_regex: UntrustedPattern | re.Pattern[str] | str | None = None

    def __post_init__(self) -> None:
        # the pattern and the needles are the user's and the log's: every search is bounded
        # in time (phaseaware.regexes), whatever form the pattern was handed in
        if isinstance(self.key_regex, str):
            pattern = compile_untrusted(self.key_regex, source="--key-regex")
            object.__setattr__(self, "key_regex", pattern)
        elif isinstance(self.key_regex, re.Pattern):
            pattern = compile_untrusted(
                self.key_regex.pattern,
                source="--key-regex",
                ignore_case=bool(self.key_regex.flags & re.IGNORECASE),
            )
            object.__setattr__(self, "key_regex", pattern)


def _bos_count(locator: Locator, text: str) -> int:
    bos_text = locator.tokenizer.bos_text
    if locator.bos == "none":
        return 0
    if locator.bos == "always":
        return 1
    return 1 if bos_text and not text.startswith(bos_text) else 0


def _prompt_text(sample: EvalSample, locator: Locator) -> tuple[str, int] | Skip:
    """(text whose tokens the model saw, tokens the server put in front of them)."""
    if sample.prompt is not None:
        return sample.prompt, _bos_count(locator, sample.prompt)
    assert sample.messages is not None  # a reader sets one of the two
    if locator.server_ids is not None:
        ids = locator.server_ids(sample.messages)
        try:  # the server's ids: one outside the tokenizer's vocabulary is named, not a crash
            text = decode_server_ids(locator.tokenizer, ids, source="the server's /tokenize")
        except EndpointError as exc:
            return Skip(sample.sample_id, "server-tokens", str(exc))
        if locator.tokenizer.encode(text) != list(ids):
            return Skip(
                sample.sample_id,
                "server-tokens",
                "the server's /tokenize ids do not round-trip through --tokenizer "
                "(another tokenizer?)",
            )
        return text, 0
    if locator.chat_format is None:
        return Skip(sample.sample_id, "render-failed", "messages need --chat-format or --server")
    try:
        return locator.chat_format.render(parse_messages(sample.messages)), 0
    except PhaseawareError as exc:
        return Skip(sample.sample_id, "render-failed", str(exc))


def _needle_span(sample: EvalSample, text: str, locator: Locator) -> int | Skip:
    """Character offset of the key in ``text`` (the needle found exactly once)."""
    if len(sample.needles) != 1:
        return Skip(sample.sample_id, "several-needles", f"{len(sample.needles)} needles")
    needle = sample.needles[0]
    first = text.find(needle)
    if first < 0:
        return Skip(sample.sample_id, "needle-absent", f"{needle[:60]!r} not in the prompt")
    if text.find(needle, first + 1) >= 0:
        return Skip(sample.sample_id, "needle-ambiguous", f"{needle[:60]!r} occurs twice or more")
    pattern = locator.key_regex
    if not isinstance(pattern, UntrustedPattern):  # made an untrusted pattern on creation
        return first
    group = 1 if pattern.groups else 0
    match = pattern.search(needle)
    if match is None or match.start(group) < 0 or match.start(group) == match.end(group):
        return Skip(sample.sample_id, "key-regex-no-match", f"in {needle[:60]!r}")
    return first + int(match.start(group))


def locate(sample: EvalSample, locator: Locator) -> Located | Skip:
    """The key token's absolute position (tokens, BOS = 0) and the prompt's length in tokens,
    or the reason the sample cannot be placed exactly."""
    if sample.truncated:
        return Skip(sample.sample_id, "truncated", "the harness reports it truncated the prompt")
    found = _prompt_text(sample, locator)
    if isinstance(found, Skip):
        return found
    text, shift = found
    key_char = _needle_span(sample, text, locator)
    if isinstance(key_char, Skip):
        return key_char
    tokens = locator.tokenizer.tokenize(text)
    length = len(tokens) + shift
    if sample.reported_tokens is not None and sample.reported_tokens != length:
        reason = "truncated" if sample.reported_tokens < length else "length-mismatch"
        return Skip(
            sample.sample_id,
            reason,
            f"the log counts {sample.reported_tokens} prompt tokens, the tokenizer {length}",
        )
    return Located(
        sample_id=sample.sample_id,
        key_position=tokens.token_at_char(key_char) + shift,
        prompt_tokens=length,
        correct=sample.correct,
    )
