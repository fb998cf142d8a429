"""``phaseaware assemble REQUEST.json``: token-exact, phase-aware prompt assembly.

The request format (keys, options) is ``phaseaware.cli.request``'s; see
examples/request.json. This module parses arguments, calls the library and
prints.
"""

from __future__ import annotations

import argparse
import json
from typing import TYPE_CHECKING

from phaseaware.cli.flags import add_trust_flag

if TYPE_CHECKING:  # pragma: no cover
    from phaseaware.assembly.report.result import AssemblyResult

NAME = "assemble"
HELP = "Assemble retrieved chunks into a prompt so evidence lands on reliable token phases."
EXAMPLE = "examples/request.json"


def configure(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("request", metavar="REQUEST.json", help=f"request file (see {EXAMPLE})")
    parser.add_argument("--json", action="store_true", help="print the full result as JSON")
    parser.add_argument(
        "--allow-tokenizer-mismatch",
        action="store_true",
        help="use the profile even though it was measured with another tokenizer "
        "(the result records the override)",
    )
    add_trust_flag(parser)


def run(args: argparse.Namespace) -> int:
    import dataclasses

    from phaseaware.assembly import assemble
    from phaseaware.cli.request import load_request

    kwargs = load_request(args.request)
    if args.allow_tokenizer_mismatch:
        kwargs["options"] = dataclasses.replace(kwargs["options"], allow_tokenizer_mismatch=True)
    result = assemble(**kwargs)
    if args.json:
        print(json.dumps(result.to_dict(), ensure_ascii=False, indent=2))
    else:
        print(format_report(result))
    return 0


def format_report(result: AssemblyResult) -> str:
    """Human-readable placement table, naive vs phase-aware summary and dropped chunks."""
    lines = [
        f"prompt: {result.token_count} tokens  tokenizer {result.tokenizer}  "
        f"chat format {result.chat_format}  profile {result.profile or '(none)'}",
        "",
        f"{'#':>3}  {'chunk':<20} {'pad':>3}  {'key positions':<24} {'residues':<16} {'exp.acc':>7}",
    ]
    for p in result.placements:
        keys = ",".join(str(t) for t in p.key_token_positions) or "-"
        residues = ",".join(str(r) for r in p.residues) or "-"
        acc = "-" if p.expected_accuracy is None else f"{p.expected_accuracy:.3f}"
        lines.append(
            f"{p.order:>3}  {p.chunk_id[:20]:<20} {p.padding_tokens:>3}  {keys[:24]:<24} "
            f"{residues[:16]:<16} {acc:>7}"
        )
    if result.repeat is not None:
        r = result.repeat
        lines.append(
            f"repeat: evidence of {r.chunk_id} restated at tokens {r.token_start}-{r.token_end} "
            f"({result.repeated_tokens} tokens)"
        )
    lines.append(f"padding: {result.padding_tokens} tokens (end pad {result.end_padding_tokens})")
    if result.length_residue is not None:
        lines.append(f"length residue: {result.length_residue}")
    lines.append(_prefix_line(result))
    lines.append(
        f"expected accuracy: naive {_fmt(result.naive_expected_accuracy)} -> "
        f"phase-aware {_fmt(result.expected_accuracy)}"
    )
    if not result.profile:
        lines.append(
            "  (no profile: these figures are a generic lost-in-the-middle heuristic, not a "
            "measurement of any model; pass --profile or run `phaseaware calibrate`)"
        )
    if result.robust is not None:
        lines.extend(_robust_lines(result))
    for d in result.dropped:
        lines.append(f"dropped {d.chunk_id}: {d.reason}")
    for n in result.neutralized:
        lines.append(f"neutralised control token {n.text!r} in {n.where} at char {n.offset}")
    if result.tokenizer_mismatch_allowed:
        lines.append("warning: the profile was measured with another tokenizer (allowed)")
    return "\n".join(lines)


def _robust_lines(result: AssemblyResult) -> list[str]:
    """Offset-robust placement: per-offset claims only (no single residue is known)."""
    report = result.robust
    assert report is not None
    lines = [
        f"offsets {list(report.offsets)}: residues per offset only; reliable residues "
        f"{list(report.reliable_residues)} (within {report.tolerance:.2f} of the best)",
    ]
    for c in report.copies:
        by_offset = " ".join(f"d={d}:r{r}" for d, r in c.residues)
        kind = "added copy" if c.added else "in place"
        lines.append(f"  {report.top_chunk_id} key at {c.key_token_position} ({kind}): {by_offset}")
    by = " ".join(f"d={d}:{_fmt(a)}" for d, a in report.accuracy_by_offset)
    lines.append(
        f"covered offsets {list(report.covered)}; expected accuracy by offset {by}; worst case "
        f"{_fmt(report.worst_case_accuracy)} (single offset {_fmt(report.single_offset_accuracy)}"
        f"); extra tokens {report.extra_tokens}"
    )
    return lines


def _fmt(value: float | None) -> str:
    return "n/a" if value is None else f"{value:.3f}"


def _prefix_line(result: AssemblyResult) -> str:
    """What a server's prefix cache can reuse (leading token ids left unchanged)."""
    line = (
        f"unchanged prefix: {result.unchanged_prefix_tokens} of {result.token_count} tokens "
        "as without context"
    )
    if result.unchanged_sent_tokens is not None:
        line += f", {result.unchanged_sent_tokens} as sent"
    return line
