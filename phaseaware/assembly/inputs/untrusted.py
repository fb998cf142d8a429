"""The input boundary of assembly: control tokens in user strings, broken or refused.

``clean_inputs`` runs every user-supplied string of one ``assemble`` call (chunk
text, evidence, question, system) through ``tokenizers.control``; ``confirm``
re-counts control strings in the final prompt: it may hold exactly the control
tokens of its template frame and no more (``VerificationError``).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import replace

from phaseaware.assembly.inputs.chunks import Chunk
from phaseaware.chat.formats import format_markers
from phaseaware.errors import ControlTokenError, VerificationError
from phaseaware.tokenizers.base import Tokenizer
from phaseaware.tokenizers.control import ControlScanner, Neutralized, scanner_for

__all__ = ["clean_inputs", "confirm"]


def clean_inputs(
    chunks: Sequence[Chunk],
    *,
    question: str,
    system: str | None,
    tokenizer: Tokenizer,
    layout: str,
    policy: str,
) -> tuple[tuple[Chunk, ...], str, str | None, tuple[Neutralized, ...], ControlScanner]:
    """(chunks, question, system) with control strings broken, what was broken, the scanner.

    ``chunks`` are normalized (ids filled in). New objects; the caller's are untouched.
    """
    scanner = scanner_for(tokenizer, markers=format_markers(layout), policy=policy)
    found: list[Neutralized] = []
    out: list[Chunk] = []
    for chunk in chunks:
        where = f"chunk {chunk.id}"
        text, hits = scanner.clean(chunk.text, where=where)
        found.extend(hits)
        evidence: list[str] = []
        for k, item in enumerate(chunk.evidence):
            cleaned, ev_hits = scanner.clean(item, where=f"{where} evidence[{k}]")
            found.extend(ev_hits)
            evidence.append(cleaned)
        if text is chunk.text and tuple(evidence) == chunk.evidence:
            out.append(chunk)
        else:
            out.append(replace(chunk, text=text, evidence=tuple(evidence)))
    question, q_hits = scanner.clean(question, where="question")
    found.extend(q_hits)
    if system is not None:
        system, s_hits = scanner.clean(system, where="system")
        found.extend(s_hits)
    return tuple(out), question, system, tuple(found), scanner


def confirm(scanner: ControlScanner, *, frame: str, prompt: str) -> None:
    """Raise ``VerificationError`` if ``prompt`` holds control strings its frame does not
    (``ControlTokenError`` under policy ``"refuse"``: the input is refused, not a bug).

    Every adapter turns a special-token string into its id only where the string
    occurs in the text, so counting the strings in the final prompt (boundaries
    between chunks, separators and template included) bounds the control ids; the
    property test ``tests/unit/chat/test_control_tokens.py`` checks the ids themselves.
    """
    expected, actual = scanner.count(frame), scanner.count(prompt)
    if actual > expected and scanner.policy == "refuse":
        raise ControlTokenError(
            f"the assembled prompt holds {actual} control tokens where its template has "
            f"{expected}: a control string forms where a chunk meets the text around the "
            "context slot or another chunk; remove the partial control string at that edge, "
            "or use control_tokens='neutralize' (the default) to break it",
            suggests_neutralize=True,
        )
    if actual > expected:
        raise VerificationError(
            f"the assembled prompt holds {actual} control tokens where its template has "
            f"{expected}; a user string forms a control token that neutralisation missed "
            "(report this with the input); pass control_tokens='refuse' to reject such input"
        )
