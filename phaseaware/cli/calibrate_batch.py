"""``phaseaware calibrate --emit-batch`` / ``--ingest``: calibration through batch files.

``--emit-batch FILE`` writes the probes that the run's log does not hold yet
(all of them for a new run) as an OpenAI batch input file. ``--ingest FILE``
reads the batch output (lines in any order), logs every usable completion and
builds the profile. Nothing vanishes silently: every unusable line (bad JSON,
HTTP error, prompt-token mismatch, unknown id) and every pending probe with no
line is printed on stderr, the usable ones are still logged, and the command
fails (exit 1) naming the fix: emit a batch again (it holds just the pending
probes), run it, ingest its output.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import Any

__all__ = ["BATCH_BACKEND", "pending_requests", "emit", "ingest"]

BATCH_BACKEND = "openai-batch"


class _Replay:
    """A backend that replays completions read from a batch output file."""

    name = BATCH_BACKEND

    def __init__(self, completions: dict[str, Any]) -> None:
        self.completions, self.model_info = completions, {}

    def complete(self, group: Any) -> Any:
        return (self.completions[r.probe_id] for r in group if r.probe_id in self.completions)

    def close(self) -> None:
        return None


def pending_requests(args: argparse.Namespace, run: dict[str, Any]) -> tuple[list[Any], set[str]]:
    """(every request of the run, ids already in its log). Raises ``LogError`` for a
    log of another run (unless ``--fresh``)."""
    from phaseaware.calibration.log import read_log
    from phaseaware.calibration.probes import iter_groups
    from phaseaware.calibration.runner import make_header
    from phaseaware.errors import LogError

    settings = run["settings"]
    header = make_header(
        settings=settings,
        tokenizer=run["tokenizer"],
        model=run["model"],
        backend=BATCH_BACKEND,
        template=run["template"],
        period=run["period"],
        position_offset=args.prompt_token_offset,
    )
    log = Path(run["log_path"])
    done: set[str] = set()
    if not run["fresh"] and log.exists() and log.stat().st_size:
        stored, records = read_log(log)
        if stored.fingerprint != header.fingerprint:
            raise LogError(
                f"{log} belongs to a different run (fingerprint {stored.fingerprint[:19]}); "
                "pass --log with another file, or --fresh to start this run over"
            )
        done = {r.probe_id for r in records}
    groups = iter_groups(tokenizer=run["tokenizer"], layout=run["layout"], settings=settings)
    requests = [p.request(max_tokens=settings.max_tokens) for g in groups for p in g.probes]
    return requests, done


def emit(args: argparse.Namespace, run: dict[str, Any]) -> int:
    from phaseaware.calibration.backends.batch import emit_batch

    requests, done = pending_requests(args, run)
    pending = [r for r in requests if r.probe_id not in done]
    model = args.model or run["model"]
    count = emit_batch(pending, args.emit_batch, model=model, endpoint=args.endpoint)
    print(
        f"wrote {count} requests ({len(done)} probes already logged) to {args.emit_batch}; "
        "after the batch finishes run the same command with --ingest <output file> instead "
        "of --emit-batch"
    )
    return 0


def ingest(args: argparse.Namespace, run: dict[str, Any], out: Path) -> int:
    from phaseaware.calibration.backends.batch import read_batch_results
    from phaseaware.calibration.runner import calibrate
    from phaseaware.cli.calibrate_report import print_report
    from phaseaware.errors import CalibrationError

    requests, done = pending_requests(args, run)
    pending = {r.probe_id for r in requests} - done
    results = read_batch_results(
        args.ingest,
        requests=requests,
        prompt_token_offset=args.prompt_token_offset,
        check_prompt_tokens=not args.no_prompt_token_check,
    )
    missing = [pid for pid in results.missing if pid in pending]
    problems = [
        f"batch line {e.line} ({e.custom_id or 'no custom_id'}): {e.message}"
        for e in results.errors
    ] + [f"probe {pid} has no result line in {args.ingest}" for pid in missing]
    for problem in problems:
        print(f"phaseaware: {problem}", file=sys.stderr)
    usable = {k: v for k, v in results.completions.items() if k in pending}
    try:
        result = calibrate(
            backend=_Replay(usable),
            out_path=None if problems else out,
            allow_missing=True,
            position_offset=args.prompt_token_offset,
            **run,
        )
    except CalibrationError:
        if not problems:
            raise
        result = None
    if problems:
        left = len(pending) - len(usable)
        raise CalibrationError(
            f"{len(results.errors)} bad line(s) and {len(missing)} missing result(s) in "
            f"{args.ingest} (listed above); the {len(usable)} usable results are logged in "
            f"{run['log_path']}, {left} probe(s) are pending: run the same command with "
            "--emit-batch FILE (it writes only the pending probes), run that batch, then "
            "--ingest its output"
        )
    print_report(result, as_json=args.json, plot=args.plot)
    return 0
