"""``phaseaware audit PROMPT_FILE``: where does each piece of evidence land in a prompt?

PROMPT_FILE holds the full prompt the model sees (template included), e.g. the
``prompt`` of ``phaseaware assemble --json``. With ``--template T`` it holds
only the raw user message instead: it is placed where the context goes in
layout T (BOS, system turn, user markers, assistant opener added), with
``--question`` (default empty) and ``--system`` placed as ``phaseaware
assemble`` would place them, and the wrapped prompt is audited.
"""

from __future__ import annotations

import argparse
import json
from typing import TYPE_CHECKING

if TYPE_CHECKING:  # pragma: no cover
    from phaseaware.audit import AuditResult

NAME = "audit"
HELP = "Report the token position, residue and expected accuracy of evidence in a prompt."


def configure(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("prompt_file", metavar="PROMPT_FILE", help="UTF-8 prompt text file")
    parser.add_argument("--tokenizer", required=True, metavar="SPEC", help="tokenizer spec")
    parser.add_argument("--profile", required=True, metavar="NAME", help="profile name or path")
    parser.add_argument(
        "--evidence", action="append", required=True, metavar="TEXT", help="evidence (repeatable)"
    )
    parser.add_argument(
        "--template",
        metavar="T",
        help="wrap PROMPT_FILE (raw user message) in layout T: none/chatml/hf/deepseek-v4",
    )
    parser.add_argument("--system", help="system prompt (with --template)")
    parser.add_argument("--question", default="", help="question after the text (with --template)")
    parser.add_argument("--thinking", action="store_true", help="thinking variant of --template")
    parser.add_argument(
        "--prompt-token-offset",
        type=int,
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
    parser.add_argument("--json", action="store_true", help="print the result as JSON")


def run(args: argparse.Namespace) -> int:
    import sys

    from phaseaware.audit import audit_prompt
    from phaseaware.profiles.registry import get_profile
    from phaseaware.tokenizers import load_tokenizer
    from phaseaware.userfiles import read_user_text

    text = read_user_text(args.prompt_file, what="PROMPT_FILE")
    tokenizer = load_tokenizer(args.tokenizer)
    profile = get_profile(args.profile)
    if args.template:
        from phaseaware.templates import get_layout

        layout = get_layout(args.template, tokenizer, thinking=args.thinking)
        text = layout.render(system=args.system, context=text, question=args.question).text
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
    missing = [e.text for e in result.evidence if not e.found]
    if missing:
        shown = ", ".join(repr(m[:40]) for m in missing[:3])
        print(
            f"phaseaware: error: {len(missing)} evidence string(s) not found in the prompt "
            f"({shown}); check the text, or the --template that wraps it",
            file=sys.stderr,
        )
        return 1
    return 0


def format_report(result: AuditResult) -> str:
    lines = [
        f"prompt: {result.token_count} tokens  tokenizer {result.tokenizer}  "
        f"profile {result.profile} (period {result.period})",
        "",
        f"{'evidence':<32} {'token':>7} {'residue':>7} {'exp.acc':>7}  local",
    ]
    for item in result.evidence:
        label = item.text if len(item.text) <= 32 else item.text[:29] + "..."
        if not item.found:
            lines.append(f"{label:<32} {'NOT FOUND':>7}")
        for occ in item.occurrences:
            local = "yes" if occ.in_local_window else ""
            lines.append(
                f"{label:<32} {occ.token_position:>7} {occ.residue:>7} "
                f"{occ.expected_accuracy:>7.3f}  {local}"
            )
    if result.length is not None:
        length = result.length
        acc = "unknown" if length.accuracy is None else f"{length.accuracy:.3f}"
        lines.append(
            f"length residue {length.residue} (mod {length.period}): accuracy {acc}, "
            f"factor {length.factor:.3f} ({length.kind}: {length.source})"
        )
    return "\n".join(lines)
