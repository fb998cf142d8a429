"""Audit an existing prompt: where does each piece of evidence land, and how reliably?

Every position is measured: the prompt is tokenized once and the first
character of each evidence occurrence is mapped to the token containing it
(``TokenizedText.token_at_char``). Expected accuracy is
``profile.position_reliabilities((position,), token_count)``, which
includes the raw local window and any length-residue effect.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from phaseaware.assembly.inputs.options import check_position_offset
from phaseaware.chat.formats import ChatFormat, get_chat_format
from phaseaware.chat.messages import (
    CONTEXT_PLACEHOLDER,
    QUESTION_PLACEHOLDER,
    Message,
    parse_conversation,
    parse_messages,
)
from phaseaware.chat.spans import render_with_spans
from phaseaware.errors import InputError
from phaseaware.profiles.model import Profile
from phaseaware.profiles.registry import check_tokenizer
from phaseaware.serialize import to_plain
from phaseaware.tokenizers.base import Tokenizer
from phaseaware.userfiles import parse_json_document, read_user_text

__all__ = [
    "Occurrence",
    "EvidenceAudit",
    "LengthAudit",
    "AuditResult",
    "audit_prompt",
    "MessageOccurrence",
    "MessagesAudit",
    "audit_messages",
    "load_conversation_file",
]


@dataclass(frozen=True)
class Occurrence:
    """One occurrence: its first char (prompt offset) and the token containing it."""

    char_offset: int
    token_position: int
    residue: int
    expected_accuracy: float
    in_local_window: bool


@dataclass(frozen=True)
class EvidenceAudit:
    """Every occurrence of one evidence string; ``best_expected_accuracy`` is derived."""

    text: str
    found: bool
    best_expected_accuracy: float | None = field(init=False)  # None: not found
    occurrences: tuple[Occurrence, ...]  # in prompt order

    def __post_init__(self) -> None:
        best = max((o.expected_accuracy for o in self.occurrences), default=None)
        object.__setattr__(self, "best_expected_accuracy", best)


@dataclass(frozen=True)
class LengthAudit:
    """The total prompt length's residue under the profile's length-residue effect."""

    period: int
    residue: int
    accuracy: float | None  # None: nothing known for this residue
    factor: float  # multiplier applied to every position (1.0 = no effect)
    kind: str
    source: str


@dataclass(frozen=True)
class AuditResult:
    token_count: int
    profile: str
    period: int
    tokenizer: str
    evidence: tuple[EvidenceAudit, ...]
    length: LengthAudit | None
    tokenizer_mismatch_allowed: bool = False  # profile fingerprint differs; caller opted in

    def to_dict(self) -> dict[str, Any]:
        """Plain JSON-ready dict (lists, not tuples), stable key order."""
        plain: dict[str, Any] = to_plain(self)
        return plain


def audit_prompt(
    prompt_text: str,
    *,
    tokenizer: Tokenizer,
    profile: Profile,
    evidence: Sequence[str],
    max_occurrences: int = 100,
    position_offset: int = 0,
    allow_tokenizer_mismatch: bool = False,
) -> AuditResult:
    """Measured position, residue and expected accuracy of each evidence occurrence.

    ``prompt_text`` is the full text the model sees (template included).
    Evidence that does not occur is reported with ``found=False``.
    ``position_offset``: tokens the server adds before the prompt (1 for a BOS
    the text lacks); residues and accuracies are taken at the model's
    positions (token position + offset), token positions stay prompt indices.
    Raises ``FingerprintMismatchError`` when ``profile`` was measured with
    another tokenizer, unless ``allow_tokenizer_mismatch`` (the result then
    says so in ``tokenizer_mismatch_allowed``).
    """
    check_position_offset(position_offset, name="position_offset")
    matched = check_tokenizer(profile, tokenizer, allow_mismatch=allow_tokenizer_mismatch)
    mismatch_allowed = not matched and profile.tokenizer.fingerprint is not None
    if not isinstance(prompt_text, str) or not prompt_text:
        raise InputError("prompt_text must be a non-empty string (the full prompt the model sees)")
    if isinstance(evidence, str):
        evidence = [evidence]
    if not evidence or any(not isinstance(e, str) or not e for e in evidence):
        raise InputError("give at least one non-empty evidence string (--evidence TEXT)")
    tokenized = tokenizer.tokenize(prompt_text)
    length = len(tokenized)
    model_length = length + position_offset
    window = profile.local_window
    audits: list[EvidenceAudit] = []
    for item in evidence:
        occurrences: list[Occurrence] = []
        start = prompt_text.find(item)
        while start >= 0 and len(occurrences) < max_occurrences:
            position = tokenized.token_at_char(start)
            occurrences.append(
                Occurrence(
                    char_offset=start,
                    token_position=position,
                    residue=(position + position_offset) % profile.period,
                    expected_accuracy=profile.position_reliabilities(
                        (position,), length, offset=position_offset
                    )[0],
                    in_local_window=window is not None and length - position <= window,
                )
            )
            start = prompt_text.find(item, start + 1)
        audits.append(
            EvidenceAudit(text=item, found=bool(occurrences), occurrences=tuple(occurrences))
        )
    return AuditResult(
        token_count=length,
        profile=profile.model,
        period=profile.period,
        tokenizer=tokenizer.spec,
        evidence=tuple(audits),
        length=_length_audit(profile, model_length),
        tokenizer_mismatch_allowed=mismatch_allowed,
    )


def _length_audit(profile: Profile, length: int) -> LengthAudit | None:
    effect = profile.length_residue_accuracy
    if effect is None:
        return None
    residue = length % effect.period
    return LengthAudit(
        period=effect.period,
        residue=residue,
        accuracy=effect.accuracy[residue],
        factor=profile.length_factor(length),
        kind=effect.kind,
        source=effect.source,
    )


@dataclass(frozen=True)
class MessageOccurrence:
    """One evidence occurrence in a conversation: which message holds it, and how it lands.

    ``message_index``/``role`` are ``None`` for text the chat format adds (markers).
    ``token_position`` is absolute in the rendered conversation.
    """

    evidence: str
    message_index: int | None
    role: str | None
    char_offset: int
    token_position: int
    residue: int
    expected_accuracy: float
    in_local_window: bool


@dataclass(frozen=True)
class MessagesAudit:
    """``audit_prompt`` of a rendered conversation, every occurrence mapped to its message."""

    chat_format: str
    messages: int
    occurrences: tuple[MessageOccurrence, ...]  # prompt order
    missing: tuple[str, ...]  # declared evidence that occurs nowhere
    audit: AuditResult

    def below(self, accuracy: float) -> tuple[MessageOccurrence, ...]:
        """Occurrences whose expected accuracy is below ``accuracy`` (prompt order)."""
        return tuple(o for o in self.occurrences if o.expected_accuracy < accuracy)

    def to_dict(self) -> dict[str, Any]:
        """Plain JSON-ready dict (lists, not tuples), stable key order."""
        plain: dict[str, Any] = to_plain(self)
        return plain


def _filled(
    raw: Sequence[Mapping[str, Any] | Message], context: str | None, question: str
) -> tuple[Message, ...]:
    messages = parse_messages(raw)
    if any(CONTEXT_PLACEHOLDER in m.content for m in messages):
        return parse_conversation(messages).fill(context=context or "", question=question)
    if context is not None:
        raise InputError(
            "a context text was given but no message holds the {context} slot; put the "
            "literal {context} where it goes, or leave the context out"
        )
    return tuple(
        m.with_content(m.content.replace(QUESTION_PLACEHOLDER, question)) for m in messages
    )


def audit_messages(
    messages: Sequence[Mapping[str, Any] | Message],
    *,
    tokenizer: Tokenizer,
    profile: Profile,
    evidence: Sequence[str],
    chat_format: str | ChatFormat,
    thinking: bool = False,
    context: str | None = None,
    question: str = "",
    position_offset: int = 0,
    max_occurrences: int = 100,
    allow_tokenizer_mismatch: bool = False,
) -> MessagesAudit:
    """Every occurrence of each ``evidence`` string in a conversation, per message.

    ``messages`` are rendered by ``chat_format`` (with the generation prompt, as
    they would be sent). A ``{context}`` slot (at most one) is filled with
    ``context`` (default empty) and every ``{question}`` with ``question``.
    Positions come from tokenizing the rendered conversation once; each
    occurrence's message is found from the messages' measured character spans
    (:func:`phaseaware.chat.spans.render_with_spans`).
    """
    fmt = (
        get_chat_format(chat_format, tokenizer, thinking=thinking)
        if isinstance(chat_format, str)
        else chat_format
    )
    rendered = render_with_spans(_filled(messages, context, question), fmt)
    result = audit_prompt(
        rendered.text,
        tokenizer=tokenizer,
        profile=profile,
        evidence=evidence,
        max_occurrences=max_occurrences,
        position_offset=position_offset,
        allow_tokenizer_mismatch=allow_tokenizer_mismatch,
    )
    found: list[MessageOccurrence] = []
    for item in result.evidence:
        for occ in item.occurrences:
            index = rendered.message_at(occ.char_offset)
            found.append(
                MessageOccurrence(
                    evidence=item.text,
                    message_index=index,
                    role=rendered.messages[index].role if index is not None else None,
                    char_offset=occ.char_offset,
                    token_position=occ.token_position,
                    residue=occ.residue,
                    expected_accuracy=occ.expected_accuracy,
                    in_local_window=occ.in_local_window,
                )
            )
    return MessagesAudit(
        chat_format=fmt.name,
        messages=len(rendered.messages),
        occurrences=tuple(sorted(found, key=lambda o: (o.char_offset, o.evidence))),
        missing=tuple(item.text for item in result.evidence if not item.found),
        audit=result,
    )


def load_conversation_file(path: str) -> tuple[list[Any], tuple[str, ...]]:
    """(messages, declared evidence) of a conversation file.

    The file holds a JSON list of ``{"role", "content"}`` messages, or an object
    ``{"messages": [...], "evidence": ["...", ...]}`` whose ``evidence`` declares
    the strings to check (``phaseaware audit --messages``). ``InputError`` if bad.
    """
    where = f"messages file {path!r}"
    doc = parse_json_document(read_user_text(path, what="messages file"), source=where)
    if isinstance(doc, list):
        return doc, ()
    if not isinstance(doc, dict) or not isinstance(doc.get("messages"), list):
        raise InputError(
            f'{where} must hold a list of messages or {{"messages": [...], "evidence": [...]}}; '
            "see examples/long_system_prompt.json"
        )
    unknown = sorted(set(doc) - {"messages", "evidence"})
    if unknown:
        raise InputError(f"{where} has unknown keys {unknown}; known: messages, evidence")
    evidence = doc.get("evidence") or []
    if not isinstance(evidence, list) or not all(isinstance(e, str) and e for e in evidence):
        raise InputError(f"{where}: 'evidence' must be a list of non-empty strings")
    return doc["messages"], tuple(evidence)
