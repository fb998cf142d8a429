"""What ``phaseaware calibrate`` checks before any model loads or probe runs: output paths
(the safe-write rule) and the optional modules the run needs. A run that would fail after
an hour of paid probes fails here, at once."""

from __future__ import annotations

import argparse

__all__ = ["check_extras", "check_paths"]


def check_extras(args: argparse.Namespace) -> None:
    """Optional modules this run needs, checked before it starts (not after an hour)."""
    from phaseaware.extras import require_extra

    if args.emit_lm_eval_task:  # writes probes for lm-eval to run: no model, no statistics
        return
    if args.plot and not args.plan:
        require_extra(modules=("matplotlib",), extra="plot", what="--plot")
    if not args.emit_batch:  # the statistics (and --plan's power) come from scipy
        require_extra(modules=("scipy",), extra="stats", what="calibrate's statistics")
    if args.plan or args.emit_batch or args.ingest:
        return
    if args.backend == "hf":
        require_extra(
            modules=("torch", "safetensors", "transformers"),
            extra="torch",
            what="--backend hf (a local transformers model)",
        )
    elif args.backend == "openai":
        require_extra(modules=("openai",), extra="openai", what="--backend openai")


def check_paths(args: argparse.Namespace) -> None:
    """Output paths checked before any model loads or probe runs (the safe-write rule of
    :mod:`phaseaware.atomic`: regular files only, no output over an input or another output)."""
    from phaseaware.atomic import check_output_path, refuse_same_file
    from phaseaware.plots import plot_format

    outputs = {"--out": args.out, "--log": args.log, "--plot": args.plot}
    outputs["--emit-batch"] = args.emit_batch
    for value in outputs.values():
        if value:
            check_output_path(value)
    named = [(flag, value) for flag, value in outputs.items() if value]
    for i, (flag, value) in enumerate(named):
        others = dict(named[i + 1 :])
        if args.ingest and flag != "--log":
            others["--ingest"] = args.ingest
        refuse_same_file(value, others, output_name=flag)
    if args.ingest and args.log:  # the log is appended to, never replaced: only a batch
        refuse_same_file(args.log, {"--ingest": args.ingest}, output_name="--log")
    if args.plot:
        plot_format(args.plot)  # an unknown extension fails now, not after every probe
