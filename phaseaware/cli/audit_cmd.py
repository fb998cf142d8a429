"""``phaseaware audit``: where does each piece of evidence land in a prompt or a conversation?

PROMPT_FILE holds the full prompt the model sees (template included), e.g. the
``prompt`` of ``phaseaware assemble --json``. With ``--chat-format F`` it holds
only the raw user message instead: it is placed where the context goes in
chat format F (BOS, system turn, user markers, assistant opener added), with
``--question`` (default empty) and ``--system`` placed as ``phaseaware
assemble`` would place them, and the wrapped prompt is audited.

With ``--messages FILE --chat-format F`` the conversation in FILE (a JSON list of
messages, or ``{"messages": [...], "evidence": [...]}``) is rendered by chat
format F and every occurrence of every evidence string is reported with its
message (index, role), absolute token position, residue and expected accuracy.
PROMPT_FILE, if given, fills the conversation's ``{context}`` slot; ``--question``
fills ``{question}``. ``--fail-under ACC`` makes audit a CI guard: exit 1 (one
line on stderr) when a declared evidence occurrence lands below expected
accuracy ACC, or does not occur at all.
"""

from __future__ import annotations

import argparse
import json
import sys
from typing import TYPE_CHECKING

from phaseaware.cli.argtypes import fraction
from phaseaware.cli.flags import add_chat_format, add_trust_flag

if TYPE_CHECKING:  # pragma: no cover
    from phaseaware.audit import AuditResult, MessagesAudit

NAME = "audit"
HELP = "Report the token position, residue and expected accuracy of evidence in a prompt."


def configure(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "prompt_file",
        metavar="PROMPT_FILE",
        nargs="?",
        help="UTF-8 prompt text file (with --messages: the text of the {context} slot)",
    )
    parser.add_argument("--tokenizer", required=True, metavar="SPEC", help="tokenizer spec")
    parser.add_argument("--profile", required=True, metavar="NAME", help="profile name or path")
    parser.add_argument(
        "--evidence", action="append", default=[], metavar="TEXT", help="evidence (repeatable)"
    )
    parser.add_argument(
        "--messages",
        metavar="FILE",
        help="audit the conversation in FILE (JSON messages) rendered by --chat-format",
    )
    add_chat_format(
        parser,
        help="wrap PROMPT_FILE (raw user message) in chat format F, or render --messages "
        "with it: none/chatml/hf/deepseek-v4/deepseek-v4.1",
    )
    parser.add_argument("--system", help="system prompt (with --chat-format)")
    parser.add_argument(
        "--question", default="", help="question after the text (with --chat-format)"
    )
    parser.add_argument("--thinking", action="store_true", help="thinking variant of --chat-format")
    parser.add_argument(
        "--prompt-token-offset",
        type=int,  # check_position_offset: [0, MAX_POSITION_OFFSET], exit 1 naming the flag
        default=0,
        metavar="N",
        help="tokens the server adds before the prompt, e.g. 1 for a BOS it prepends "
        "(residues are taken at token position + N; default 0)",
    )
    parser.add_argument(
        "--allow-tokenizer-mismatch",
        action="store_true",
        help="use the profile even though it was measured with another tokenizer "
        "(the result records the override)",
    )
    parser.add_argument(
        "--fail-under",
        type=fraction(),
        metavar="ACC",
        help="exit 1 when an evidence occurrence's expected accuracy is below ACC (CI guard)",
    )
    parser.add_argument("--json", action="store_true", help="print the result as JSON")
    add_trust_flag(parser)


def _read_text(path: str, what: str) -> str:
    from phaseaware.userfiles import read_user_text

    return read_user_text(path, what=what)  # regular files only, size-capped


def run(args: argparse.Namespace) -> int:
    from phaseaware.audit import audit_prompt
    from phaseaware.errors import InputError
    from phaseaware.profiles.registry import get_profile
    from phaseaware.tokenizers import load_tokenizer
    from phaseaware.userfiles import read_user_text

    if args.messages is not None:
        return _run_messages(args)
    if args.prompt_file is None:
        raise InputError("give PROMPT_FILE, or --messages FILE --chat-format F")
    if not args.evidence:
        raise InputError("give at least one --evidence TEXT")
    text = read_user_text(args.prompt_file, what="PROMPT_FILE")
    tokenizer = load_tokenizer(args.tokenizer)
    profile = get_profile(args.profile)
    if args.chat_format:
        from phaseaware.chat.layout import conversation_layout

        layout = conversation_layout(
            tokenizer=tokenizer, chat_format=args.chat_format, system=args.system,
            thinking=args.thinking,
        )  # fmt: skip
        text = layout.render(system=None, context=text, question=args.question).text
    result = audit_prompt(
        text,
        tokenizer=tokenizer,
        profile=profile,
        evidence=args.evidence,
        position_offset=args.prompt_token_offset,
        allow_tokenizer_mismatch=args.allow_tokenizer_mismatch,
    )
    if args.json:
        print(json.dumps(result.to_dict(), ensure_ascii=False, indent=2))
    else:
        print(format_report(result))
    failures = [
        f'"{_label(e.text)}" at token {o.token_position} (residue {o.residue}, '
        f"{o.expected_accuracy:.3f})"
        for e in result.evidence
        for o in e.occurrences
        if args.fail_under is not None and o.expected_accuracy < args.fail_under
    ]
    missing = [e.text for e in result.evidence if not e.found]
    return _verdict(args.fail_under, failures, missing)


def _run_messages(args: argparse.Namespace) -> int:
    from phaseaware.audit import audit_messages, load_conversation_file
    from phaseaware.errors import InputError
    from phaseaware.profiles.registry import get_profile
    from phaseaware.tokenizers import load_tokenizer

    if not args.chat_format:
        raise InputError(
            "--messages needs --chat-format F (none/chatml/hf/deepseek-v4/deepseek-v4.1)"
        )
    if args.system:
        raise InputError("--messages holds the system prompt; drop --system")
    messages, declared = load_conversation_file(args.messages)
    evidence = [*declared, *(e for e in args.evidence if e not in declared)]
    if not evidence:
        raise InputError('give --evidence TEXT, or declare "evidence": [...] in the messages file')
    context = _read_text(args.prompt_file, "PROMPT_FILE") if args.prompt_file else None
    tokenizer = load_tokenizer(args.tokenizer)
    result = audit_messages(
        messages,
        tokenizer=tokenizer,
        profile=get_profile(args.profile),
        evidence=evidence,
        chat_format=args.chat_format,
        thinking=args.thinking,
        context=context,
        question=args.question,
        position_offset=args.prompt_token_offset,
        allow_tokenizer_mismatch=args.allow_tokenizer_mismatch,
    )
    if args.json:
        print(json.dumps(result.to_dict(), ensure_ascii=False, indent=2))
    else:
        print(format_messages_report(result))
    failures = [
        f'"{_label(o.evidence)}" in {_where(o.message_index, o.role)} at token '
        f"{o.token_position} (residue {o.residue}, {o.expected_accuracy:.3f})"
        for o in (result.below(args.fail_under) if args.fail_under is not None else ())
    ]
    return _verdict(args.fail_under, failures, list(result.missing))


def _verdict(fail_under: float | None, failures: list[str], missing: list[str]) -> int:
    """0, or 1 with one line on stderr (evidence not found, or below ``--fail-under``)."""
    if not (failures or missing):
        return 0
    parts = []
    if failures:
        parts.append(
            f"{len(failures)} evidence occurrence(s) below expected accuracy {fail_under:.3f} "
            f"(first: {failures[0]}); move or reword that text (phaseaware assemble places "
            "evidence on reliable positions), or lower --fail-under"
        )
    if missing:
        parts.append(
            f"evidence not found: {', '.join(repr(m) for m in missing)}; fix the evidence "
            "string or the prompt"
        )
    print("phaseaware: audit failed: " + "; ".join(parts), file=sys.stderr)
    return 1


def _label(text: str, width: int = 32) -> str:
    return text if len(text) <= width else text[: width - 3] + "..."


def _where(index: int | None, role: str | None) -> str:
    return "template text" if index is None else f"message {index} ({role})"


def format_report(result: AuditResult) -> str:
    lines = [
        f"prompt: {result.token_count} tokens  tokenizer {result.tokenizer}  "
        f"profile {result.profile} (period {result.period})",
        "",
        f"{'evidence':<32} {'token':>7} {'residue':>7} {'exp.acc':>7}  local",
    ]
    for item in result.evidence:
        label = _label(item.text)
        if not item.found:
            lines.append(f"{label:<32} {'NOT FOUND':>7}")
        for occ in item.occurrences:
            local = "yes" if occ.in_local_window else ""
            lines.append(
                f"{label:<32} {occ.token_position:>7} {occ.residue:>7} "
                f"{occ.expected_accuracy:>7.3f}  {local}"
            )
    lines.extend(_length_lines(result))
    return "\n".join(lines)


def _length_lines(result: AuditResult) -> list[str]:
    if result.length is None:
        return []
    length = result.length
    acc = "unknown" if length.accuracy is None else f"{length.accuracy:.3f}"
    return [
        f"length residue {length.residue} (mod {length.period}): accuracy {acc}, "
        f"factor {length.factor:.3f} ({length.kind}: {length.source})"
    ]


def format_messages_report(result: MessagesAudit) -> str:
    audit = result.audit
    lines = [
        f"conversation: {result.messages} messages, chat format {result.chat_format}, "
        f"{audit.token_count} tokens  tokenizer {audit.tokenizer}  profile {audit.profile} "
        f"(period {audit.period})",
        "",
        f"{'evidence':<32} {'msg':>4} {'role':<9} {'token':>7} {'residue':>7} {'exp.acc':>7}  "
        "local",
    ]
    for o in result.occurrences:
        msg = "-" if o.message_index is None else str(o.message_index)
        local = "yes" if o.in_local_window else ""
        lines.append(
            f"{_label(o.evidence):<32} {msg:>4} {o.role or 'template':<9} {o.token_position:>7} "
            f"{o.residue:>7} {o.expected_accuracy:>7.3f}  {local}"
        )
    for text in result.missing:
        lines.append(f"{_label(text):<32} NOT FOUND")
    lines.extend(_length_lines(audit))
    return "\n".join(lines)
