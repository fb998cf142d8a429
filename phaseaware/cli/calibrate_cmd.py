"""``phaseaware calibrate``: measure a model's retrieval accuracy by key residue.

With no options it calibrates the shipped reference model (backend ``hf``,
tokenizer ``reference``, chat format ``hf``, period 8). The profile goes to
``./phaseaware-profiles/<model>.json`` and the durable log next to it
(``<model>.calibration.jsonl``) unless ``--out``/``--log`` say otherwise; both
paths are printed. Re-running the same command resumes from the log.
``--sweeps key,length,window`` also measures retrieval with the key inside the
model's raw local window (the profile's ``local_window_accuracy``). Install a
profile for lookup by name with ``phaseaware profile`` (user profile folder).
API keys for ``--backend openai`` come from ``PHASEAWARE_API_KEY`` or
``OPENAI_API_KEY`` and are never written to the log.

``--backend openai`` checks every answer's ``usage.prompt_tokens`` against
phaseaware's count (``--no-prompt-token-check`` turns that off). A server that
adds tokens itself (a BOS) needs ``--prompt-token-offset N``; the model then
sees every token N positions later, so the log and profile record positions
shifted by N (``profile.extra["position_offset"]``). ``--emit-batch`` and
``--ingest`` (see :mod:`phaseaware.cli.calibrate_batch`) do the same offline.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import Any

from phaseaware.cli.argtypes import fraction, integer, number, period_or_auto
from phaseaware.cli.calibrate_checks import check_extras, check_paths
from phaseaware.cli.flags import add_chat_format, add_openai_backend
from phaseaware.limits import MAX_PERIOD, MAX_TOKENS

NAME = "calibrate"
HELP = "Measure a model's accuracy by key residue and write its profile."
DEFAULT_FOLDER = Path("phaseaware-profiles")


def configure(parser: argparse.ArgumentParser) -> None:
    add = parser.add_argument
    add(
        "--backend",
        choices=("hf", "openai", "callable"),
        default="hf",
        help="model backend (default hf)",
    )
    add(
        "--model",
        help="hf: folder, hf:<name> or .gguf file (default: reference model); "
        "openai: served model name; callable: module:function",
    )
    add("--tokenizer", help="tokenizer spec (default: the model's own; required for openai)")
    add_chat_format(
        parser, help="chat format: none, chatml, hf, deepseek-v4, deepseek-v4.1 (default hf)"
    )
    add(
        "--period",
        type=period_or_auto,
        default=8,
        help="residue period N, or 'auto' to detect it (default 8)",
    )
    add = parser.add_argument_group("what is probed").add_argument
    add(
        "--max-period",
        type=integer(1, MAX_PERIOD),
        default=16,
        help="--period auto: offsets swept, and every period 2..N is tested (default 16)",
    )
    add(
        "--context-tokens",
        type=integer(16, MAX_TOKENS),
        help="prompt length in tokens (default 300 reference, 1024 others)",
    )
    add(
        "--distractors",
        type=integer(0, 10_000),
        help="distractor records per probe besides the asked one (default 4 reference, 3 others)",
    )
    add(
        "--depth",
        type=_depth,
        help="where the asked record sits, as a fraction range of the context, e.g. 0.15,0.6 "
        "(default 0,0.9 reference, 0.15,0.6 others)",
    )
    add(
        "--base-prompts",
        type=integer(1, 1_000_000),
        default=30,
        help="base prompts, each run at every offset (default 30)",
    )
    add(
        "--sweeps",
        help="comma list of key,length,window (default key,window reference, key,length "
        "others); window: the asked "
        "record last, its key 0..N-1 tokens further back from the prompt's end per offset "
        "(measures retrieval inside the model's raw local window)",
    )
    add(
        "--local-window",
        type=int,  # range-checked in run() (exit 1, the flag named: the tests pin it)
        help="the model's raw local window in tokens, where the backend cannot tell "
        "(--backend openai/callable); recorded in the profile and used by --sweeps window",
    )
    add("--seed", type=integer(0, 2**63 - 1), default=0, help="probe seed")
    add(
        "--max-tokens",
        type=integer(1, 100_000),
        default=12,
        help="tokens generated per probe (default 12)",
    )
    add(
        "--threads",
        type=integer(1, 4096),
        default=1,
        help="torch CPU threads for --backend hf (default 1)",
    )
    main = parser.add_argument  # listed first, under "options"
    main("--log", help="calibration log (JSONL); default next to the profile")
    main("--out", help="profile file (default ./phaseaware-profiles/<model>.json)")
    main("--fresh", action="store_true", help="discard the log and start over")
    main("--json", action="store_true", help="print a machine-readable summary")
    main("--plot", help="also save a bar chart PNG (needs matplotlib)")
    add = parser.add_argument_group("--plan (estimate only, nothing runs)").add_argument
    add("--plan", action="store_true", help="estimate probes/tokens/cost and exit")
    add(
        "--target-half-width",
        type=number(0.0, 0.5, low_open=True),
        help="--plan: CI half-width per residue (fraction)",
    )
    add(
        "--detect-gap",
        type=fraction(low_open=True),
        help="--plan: accuracy gap to detect (fraction)",
    )
    add(
        "--gap-period",
        type=integer(2, MAX_PERIOD),
        help="--plan with --period auto: size the sweep so that --detect-gap repeating every "
        "N offsets is found as period N (e.g. 2)",
    )
    add("--price-per-million", type=number(0.0, 1e6), help="--plan: price per million tokens")
    served = parser.add_argument_group("--backend openai (an OpenAI-compatible server)")
    add = served.add_argument
    add_openai_backend(served, concurrency_help="--backend openai: requests in flight")
    add(
        "--prompt-token-offset",
        type=int,  # check_position_offset in run(): [0, MAX_POSITION_OFFSET], exit 1
        default=0,
        help="openai/--ingest: tokens the server adds before each prompt itself (e.g. 1 for "
        "a BOS); logged positions shift by it (default 0)",
    )
    add(
        "--no-prompt-token-check",
        action="store_true",
        help="openai/--ingest: do not compare the server's usage.prompt_tokens with "
        "phaseaware's count (unsafe: a template mismatch then goes unnoticed)",
    )
    add = parser.add_argument_group("batch files and lm-eval (no live model)").add_argument
    add("--emit-batch", help="write pending probes as an OpenAI batch input file and exit")
    add("--ingest", help="read an OpenAI batch output file instead of calling a model")
    add("--emit-lm-eval-task", metavar="DIR", help="write the probes as an lm-eval task and exit")


def run(args: argparse.Namespace) -> int:
    from phaseaware.assembly.inputs.options import check_position_offset
    from phaseaware.errors import CalibrationError

    served = args.backend == "openai" or bool(args.ingest or args.emit_batch)
    if args.backend == "openai" and not args.tokenizer:
        raise CalibrationError("--backend openai needs --tokenizer (the served model's tokenizer)")
    if args.local_window is not None and not 1 <= args.local_window <= MAX_TOKENS:
        raise CalibrationError(
            f"--local-window must be in [1, {MAX_TOKENS}] tokens, got {args.local_window}"
        )
    window, context = args.local_window, args.context_tokens
    if window is not None and context is not None and window > context:
        # the profile would be refused at the end, after every probe ran
        raise CalibrationError(
            f"--local-window {window} is longer than --context-tokens {context}: the "
            "window must fit in the prompts measured"
        )
    check_position_offset(
        args.prompt_token_offset, name="--prompt-token-offset", error=CalibrationError
    )
    if args.prompt_token_offset and not served:
        raise CalibrationError(
            f"--prompt-token-offset applies to --backend openai and batch files only; "
            f"--backend {args.backend} sees exactly phaseaware's tokens"
        )
    check_paths(args)
    check_extras(args)
    settings = _settings(args)
    if args.plan:
        from phaseaware.calibration.report import format_plan, plan_summary

        doc = plan_summary(
            settings,
            target_half_width=args.target_half_width,
            detect_gap=args.detect_gap,
            price_per_million=args.price_per_million,
            gap_period=args.gap_period,
            auto_period=args.period is None,
        )
        print(json.dumps(doc, indent=2) if args.json else format_plan(doc))
        return 0
    if args.emit_lm_eval_task:
        from phaseaware.cli.calibrate_lm_eval import emit_task

        return emit_task(args, settings)
    return _calibrate(args, settings)


def _settings(args: argparse.Namespace) -> Any:
    """The probe settings: the flags, over the reference model's probe defaults."""
    from phaseaware.calibration.probes import ProbeSettings

    defaults: dict[str, Any] = {"context_tokens": 1024}
    if args.backend == "hf" and args.model is None:  # as in `phaseaware demo`
        from phaseaware.reference import probe_defaults

        defaults = {
            "context_tokens": probe_defaults.CONTEXT_TOKENS,
            "distractors": probe_defaults.DISTRACTORS,
            "depth": probe_defaults.DEPTH,
            "sweeps": probe_defaults.SWEEPS,
        }
    if args.sweeps is not None:
        defaults["sweeps"] = tuple(s.strip() for s in args.sweeps.split(",") if s.strip())
    for name in ("context_tokens", "distractors", "depth"):
        if getattr(args, name) is not None:
            defaults[name] = getattr(args, name)
    return ProbeSettings(
        n_offsets=args.period if args.period is not None else args.max_period,
        base_prompts=args.base_prompts,
        seed=args.seed,
        max_tokens=args.max_tokens,
        spread_keys=args.period is None,  # --period auto: keys on every residue per offset
        **defaults,
    )


def _depth(text: str) -> tuple[float, float]:
    """``--depth LO,HI``: fractions of the context, 0 <= LO <= HI <= 1."""
    try:
        low, high = (float(v) for v in text.split(","))
    except ValueError:
        raise argparse.ArgumentTypeError(
            f"expected two fractions like 0.15,0.6, got {text!r}"
        ) from None
    if not 0.0 <= low <= high <= 1.0:
        raise argparse.ArgumentTypeError(f"need 0 <= LO <= HI <= 1, got {text!r}")
    return low, high


def _api_key(args: argparse.Namespace) -> str | None:
    from phaseaware.cli.api_keys import api_key_from_args
    from phaseaware.errors import CalibrationError

    # PHASEAWARE_API_KEY itself is read by the OpenAI backend.
    return api_key_from_args(
        args, error=CalibrationError, env_name="PHASEAWARE_API_KEY", read_env=False
    )


def _backend_options(args: argparse.Namespace) -> Any:
    from phaseaware.calibration.backends.factory import BackendOptions

    return BackendOptions(
        api_key=_api_key(args) if args.backend == "openai" else None,
        kind=args.backend,
        model=args.model,
        threads=args.threads,
        local_window=args.local_window,
        base_url=args.base_url,
        endpoint=args.endpoint,
        concurrency=args.concurrency,
        timeout=args.timeout,
        max_retries=args.max_retries,
        prompt_token_offset=args.prompt_token_offset,
        prompt_token_check=not args.no_prompt_token_check,
    )


def _calibrate(args: argparse.Namespace, settings: Any) -> int:
    from phaseaware.atomic import (
        ensure_output_folder,
        refuse_outputs_over_inputs,
        refuse_same_file,
    )
    from phaseaware.calibration.backends.factory import run_names
    from phaseaware.cli.flags import check_openai_server
    from phaseaware.cli.run_inputs import calibrate_inputs
    from phaseaware.filelock import hold_lock
    from phaseaware.profiles.registry import profile_filename
    from phaseaware.tokenizers import load_tokenizer

    options = _backend_options(args)
    default_model = None
    if args.backend == "hf" and args.model is None:
        from phaseaware.reference.load import reference_model_source

        default_model = reference_model_source()
    name, spec = run_names(options, tokenizer=args.tokenizer, default_model=default_model)
    chat_format = args.chat_format or "hf"
    out = Path(args.out) if args.out else DEFAULT_FOLDER / profile_filename(name)
    log = Path(args.log) if args.log else out.with_name(out.stem + ".calibration.jsonl")
    refuse_same_file(out, {"--log": log}, output_name="--out")
    outputs = {"--out": out, "--log": log, "--plot": args.plot, "--emit-batch": args.emit_batch}
    refuse_outputs_over_inputs(outputs, calibrate_inputs(args, tokenizer_spec=spec))
    if args.backend == "openai" and not (args.emit_batch or args.ingest):
        check_openai_server(args.base_url, api_key=options.api_key)  # 3 s, before any work
    tokenizer = load_tokenizer(spec)
    ensure_output_folder(log.parent, what="the calibration log")
    with hold_lock(log, what="calibration log"):  # a second run on this log fails here
        run = _run(args, settings, tokenizer, name, chat_format, log)
        if args.emit_batch or args.ingest:
            return _batch(args, run, out)
        return _probe(args, run, options, default_model, out, log)


def _run(
    args: argparse.Namespace, settings: Any, tokenizer: Any, name: str, chat_format: str, log: Path
) -> Any:
    from phaseaware.calibration.runner import CalibrationRun
    from phaseaware.chat.layout import conversation_layout

    return CalibrationRun(
        tokenizer=tokenizer,
        layout=conversation_layout(tokenizer=tokenizer, chat_format=chat_format),
        settings=settings,
        model=name,
        chat_format=chat_format,
        log_path=log,
        period=args.period,
        fresh=args.fresh,
        position_offset=args.prompt_token_offset,
    )


def _batch(args: argparse.Namespace, run: Any, out: Path) -> int:
    from phaseaware.cli.calibrate_batch import emit, ingest

    return emit(args, run) if args.emit_batch else ingest(args, run, out)


def _probe(
    args: argparse.Namespace, run: Any, options: Any, default_model: Any, out: Path, log: Path
) -> int:
    from phaseaware.calibration.backends.factory import make_backend
    from phaseaware.endpoints.request_settings import chat_template_kwargs

    backend = make_backend(
        options,
        run.tokenizer,
        default_model=default_model,
        chat_template_kwargs=chat_template_kwargs(chat_format=run.chat_format),
    )
    from phaseaware.cli.calibrate_output import Progress

    progress = Progress(log=log)
    try:
        result = run.run(backend, out_path=out, progress=progress)
    except KeyboardInterrupt:
        progress.finish()
        print(
            f"phaseaware: interrupted; completed probes are saved in {log}; run the same "
            "command again to resume",
            file=sys.stderr,
        )
        return 130
    finally:
        backend.close()
    progress.finish()
    from phaseaware.cli.calibrate_output import print_report

    print_report(result, as_json=args.json, plot=args.plot)
    return 0
