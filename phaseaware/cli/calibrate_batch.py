"""``phaseaware calibrate --emit-batch`` / ``--ingest``: calibration through batch files.

The work is :mod:`phaseaware.calibration.batch_run`; this module prints what it
reports. ``--emit-batch FILE`` writes the probes the run's log does not hold yet;
``--ingest FILE`` logs every usable result, prints every unusable line and missing
result on stderr, and fails (exit 1) naming the fix when there were any.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import Any

__all__ = ["emit", "ingest"]


def emit(args: argparse.Namespace, run: Any) -> int:
    from phaseaware.calibration.batch_run import emit_pending

    report = emit_pending(
        run, args.emit_batch, model=args.model or run.model, endpoint=args.endpoint
    )
    print(
        f"wrote {report.written} requests ({report.already_logged} probes already logged) to "
        f"{report.path}; after the batch finishes run the same command with --ingest <output "
        "file> instead of --emit-batch"
    )
    return 0


def ingest(args: argparse.Namespace, run: Any, out: Path) -> int:
    from phaseaware.calibration.batch_run import ingest_results
    from phaseaware.cli.calibrate_output import print_report
    from phaseaware.errors import CalibrationError

    report = ingest_results(
        run, args.ingest, out_path=out, check_prompt_tokens=not args.no_prompt_token_check
    )
    for problem in report.problems:
        print(f"phaseaware: {problem}", file=sys.stderr)
    if report.failure is not None:
        raise CalibrationError(report.failure)
    print_report(report.result, as_json=args.json, plot=args.plot)
    return 0
