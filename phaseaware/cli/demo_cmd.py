"""``phaseaware demo``: the whole story on the shipped reference model.

Parses the flags, runs :func:`phaseaware.demo.run.run_demo` and prints its stages
(stderr), the calibration report and the RAG table, or one JSON document.
"""

from __future__ import annotations

import argparse
import json
import sys
from typing import TYPE_CHECKING

if TYPE_CHECKING:  # pragma: no cover
    from phaseaware.calibration.runner import CalibrationResult
from pathlib import Path

from phaseaware.cli.argtypes import integer
from phaseaware.limits import MAX_TOKENS

NAME = "demo"
# phaseaware.demo.run.DEFAULT_OUT, repeated: command modules import nothing heavy at load
DEFAULT_OUT = Path("phaseaware-demo")
HELP = "Calibrate the shipped reference model, then compare RAG assembly strategies on it."


def configure(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--questions", type=integer(1, 1_000_000), default=400, help="held-out RAG questions"
    )
    parser.add_argument(
        "--base-prompts",
        type=integer(1, 1_000_000),
        default=40,
        help="calibration base prompts (x 8 residues)",
    )
    parser.add_argument(
        "--context-tokens",
        type=integer(16, MAX_TOKENS),
        default=None,
        help="calibration prompt size (default 300, about that of the RAG prompts)",
    )
    parser.add_argument(
        "--seed", type=integer(0, 2**63 - 1), default=0, help="seed for probes and questions"
    )
    parser.add_argument(
        "--out",
        type=Path,
        default=DEFAULT_OUT,
        help="folder for the log and the profile",
    )
    parser.add_argument("--fresh", action="store_true", help="discard an earlier calibration log")
    parser.add_argument("--json", action="store_true", help="print one JSON document at the end")


def run(args: argparse.Namespace) -> int:
    from phaseaware.extras import require_extra

    require_extra(
        modules=("torch", "safetensors", "transformers", "scipy"),
        extra="reference",
        what="demo (it runs the reference model)",
    )
    from phaseaware.cli.calibrate_output import Progress, print_report
    from phaseaware.demo.run import DemoSettings, run_demo
    from phaseaware.errors import FileBusyError

    settings = DemoSettings(
        questions=args.questions,
        base_prompts=args.base_prompts,
        context_tokens=args.context_tokens,
        seed=args.seed,
        out=args.out,
        fresh=args.fresh,
    )
    bars = {"calibrate": Progress(), "compare": Progress(label="compare", unit="answers")}

    def on_calibrated(calibration: CalibrationResult) -> None:
        bars["calibrate"].finish()  # its probes are all in: the bar's last line
        if not args.json:
            print_report(calibration)

    try:
        result = run_demo(
            settings,
            on_stage=lambda message: print(message, file=sys.stderr),
            on_calibrated=on_calibrated,
            on_progress=lambda step, done, total: bars[step](done, total, None),
        )
    except FileBusyError as exc:  # another demo writes to the same folder
        busy = str(exc).split("; ")[0]
        raise FileBusyError(
            f"{busy}: another `phaseaware demo` is using --out {args.out}; wait for it to "
            "finish, or give this one another folder with --out DIR"
        ) from None
    bars["compare"].finish()
    if args.json:
        print(json.dumps(result.summary(), indent=2))
    else:
        print()
        print(result.comparison.text())
    return 0
