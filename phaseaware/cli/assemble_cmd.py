"""``phaseaware assemble REQUEST.json``: token-exact, phase-aware prompt assembly.

REQUEST keys: ``tokenizer`` (spec), ``template`` (none/chatml/hf/deepseek-v4,
default none), ``profile`` (name or path; optional), ``system`` (optional),
``question``, ``chunks`` ([{id, text, score, evidence?}]), ``budget_tokens``,
``options`` (optional: strategy, pad, repeat, length_pad, pad_cost, thinking,
allow_tokenizer_mismatch, period, position_offset: tokens the server adds
before the prompt, e.g. 1 for a BOS). See examples/request.json.
"""

from __future__ import annotations

import argparse
import json
from typing import Any

NAME = "assemble"
HELP = "Assemble retrieved chunks into a prompt so evidence lands on reliable token phases."
EXAMPLE = "examples/request.json"
_OPTION_KEYS = (
    "position_offset",
    "strategy",
    "pad",
    "repeat",
    "length_pad",
    "pad_cost",
    "allow_tokenizer_mismatch",
    "period",
    "max_keys_per_chunk",
    "repeat_max_chars",
)


def configure(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("request", metavar="REQUEST.json", help=f"request file (see {EXAMPLE})")
    parser.add_argument("--json", action="store_true", help="print the full result as JSON")


def run(args: argparse.Namespace) -> int:
    from phaseaware.assembly import assemble_from_specs

    request = load_request(args.request)
    result = assemble_from_specs(**request)
    if args.json:
        print(json.dumps(result.to_dict(), ensure_ascii=False, indent=2))
    else:
        print(format_report(result))
    return 0


def _fail(message: str) -> None:
    from phaseaware.errors import InputError

    raise InputError(f"{message}; see {EXAMPLE} for a minimal valid request")


def load_request(path: str) -> dict[str, Any]:
    """Keyword arguments for ``assemble_from_specs`` from a request file (InputError if bad)."""
    try:
        with open(path, "rb") as handle:
            raw = handle.read()
    except OSError as exc:
        _fail(f"cannot read request file {path!r}: {exc.strerror}")
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError as exc:
        _fail(f"request file {path!r} is not valid UTF-8 (byte {exc.start})")
    try:
        doc = json.loads(text)
    except json.JSONDecodeError as exc:
        _fail(f"request file {path!r} is not valid JSON (line {exc.lineno}: {exc.msg})")
    return parse_request(doc, source=path)


def parse_request(doc: Any, *, source: str = "<request>") -> dict[str, Any]:
    from phaseaware.assembly import AssemblyOptions

    if not isinstance(doc, dict):
        _fail(f"{source}: the request must be a JSON object")
    for key in ("tokenizer", "question", "chunks", "budget_tokens"):
        if key not in doc:
            _fail(f"{source}: missing key {key!r}")
    for key in ("tokenizer", "question"):
        if not isinstance(doc[key], str):
            _fail(f"{source}: key {key!r} must be a string")
    budget = doc["budget_tokens"]
    if isinstance(budget, bool) or not isinstance(budget, int) or budget < 1:
        _fail(f"{source}: key 'budget_tokens' must be a positive integer, got {budget!r}")
    chunks_doc = doc["chunks"]
    if not isinstance(chunks_doc, list):
        _fail(f"{source}: key 'chunks' must be a list of objects")
    chunks = [_parse_chunk(item, n, source) for n, item in enumerate(chunks_doc)]
    options_doc = doc.get("options") or {}
    if not isinstance(options_doc, dict):
        _fail(f"{source}: key 'options' must be an object")
    unknown = sorted(set(options_doc) - set(_OPTION_KEYS) - {"thinking"})
    if unknown:
        _fail(f"{source}: unknown key(s) in 'options': {', '.join(unknown)}")
    for key in ("template", "profile", "system"):
        if doc.get(key) is not None and not isinstance(doc[key], str):
            _fail(f"{source}: key {key!r} must be a string")
    options = AssemblyOptions(**{k: options_doc[k] for k in _OPTION_KEYS if k in options_doc})
    return {
        "chunks": chunks,
        "tokenizer": doc["tokenizer"],
        "layout": doc.get("template") or "none",
        "question": doc["question"],
        "system": doc.get("system"),
        "profile": doc.get("profile"),
        "budget_tokens": budget,
        "options": options,
        "thinking": bool(options_doc.get("thinking", False)),
    }


def _parse_chunk(item: Any, n: int, source: str):
    from phaseaware.chunks import Chunk

    if not isinstance(item, dict):
        _fail(f"{source}: chunks[{n}] must be an object with 'text'")
    if not isinstance(item.get("text"), str):
        _fail(f"{source}: chunks[{n}] is missing key 'text' (a string)")
    score = item.get("score", 0.0)
    if isinstance(score, bool) or not isinstance(score, int | float):
        _fail(f"{source}: chunks[{n}].score must be a number")
    evidence = item.get("evidence") or []
    if not isinstance(evidence, list) or not all(isinstance(e, str) for e in evidence):
        _fail(f"{source}: chunks[{n}].evidence must be a list of strings")
    chunk_id = item.get("id")
    if chunk_id is not None and not isinstance(chunk_id, str):
        _fail(f"{source}: chunks[{n}].id must be a string")
    return Chunk(text=item["text"], score=float(score), id=chunk_id, evidence=tuple(evidence))


def format_report(result) -> str:
    """Human-readable placement table, naive vs phase-aware summary and dropped chunks."""
    lines = [
        f"prompt: {result.token_count} tokens  tokenizer {result.tokenizer}  "
        f"layout {result.layout}  profile {result.profile or '(none)'}",
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
    lines.append(
        f"expected accuracy: naive {_fmt(result.naive_expected_accuracy)} -> "
        f"phase-aware {_fmt(result.expected_accuracy)}"
    )
    for d in result.dropped:
        lines.append(f"dropped {d.chunk_id}: {d.reason}")
    return "\n".join(lines)


def _fmt(value: float | None) -> str:
    return "n/a" if value is None else f"{value:.3f}"
