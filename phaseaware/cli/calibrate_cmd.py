"""``phaseaware calibrate``: measure a model's retrieval accuracy by key residue.

With no options it calibrates the shipped reference model (backend ``hf``,
tokenizer ``reference``, template ``hf``, period 8). The profile goes to
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
import time
from pathlib import Path
from typing import Any

NAME = "calibrate"
HELP = "Measure a model's accuracy by key residue and write its profile."
DEFAULT_FOLDER = Path("phaseaware-profiles")


def _period(text: str) -> int | None:
    if text == "auto":
        return None
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(
            f"--period must be an integer or 'auto', got {text!r}"
        ) from None
    if value < 1:
        raise argparse.ArgumentTypeError(f"--period must be >= 1, got {value}")
    return value


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
    add("--template", help="prompt layout: none, chatml, hf, deepseek-v4 (default hf)")
    add(
        "--period",
        type=_period,
        default=8,
        help="residue period N, or 'auto' to detect it (default 8)",
    )
    add("--max-period", type=int, default=16, help="offsets swept with --period auto (default 16)")
    add(
        "--context-tokens",
        type=int,
        help="prompt length in tokens (default 300 reference, 1024 others)",
    )
    add(
        "--distractors",
        type=int,
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
        type=int,
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
        type=int,
        help="the model's raw local window in tokens, where the backend cannot tell "
        "(--backend openai/callable); recorded in the profile and used by --sweeps window",
    )
    add("--seed", type=int, default=0)
    add("--max-tokens", type=int, default=12, help="tokens generated per probe (default 12)")
    add("--threads", type=int, default=1, help="torch CPU threads for --backend hf (default 1)")
    add("--log", help="calibration log (JSONL); default next to the profile")
    add("--out", help="profile file (default ./phaseaware-profiles/<model>.json)")
    add("--fresh", action="store_true", help="discard the log and start over")
    add("--json", action="store_true", help="print a machine-readable summary")
    add("--plot", help="also save a bar chart PNG (needs matplotlib)")
    add("--plan", action="store_true", help="estimate probes/tokens/cost and exit")
    add("--target-half-width", type=float, help="--plan: CI half-width per residue (fraction)")
    add("--detect-gap", type=float, help="--plan: accuracy gap to detect (fraction)")
    add("--price-per-million", type=float, help="--plan: price per million tokens")
    add("--base-url", help="--backend openai: server URL, e.g. http://localhost:8000/v1")
    add("--endpoint", choices=("chat", "completions"), default="chat", help="openai endpoint")
    add("--concurrency", type=int, default=4, help="--backend openai: requests in flight")
    add(
        "--timeout",
        type=float,
        default=60.0,
        help="--backend openai: seconds per HTTP attempt (default 60)",
    )
    add(
        "--max-retries",
        type=int,
        default=5,
        help="--backend openai: retries of 408/409/429/5xx/timeouts per request (default 5)",
    )
    add(
        "--prompt-token-offset",
        type=int,
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
    add("--emit-batch", help="write pending probes as an OpenAI batch input file and exit")
    add("--ingest", help="read an OpenAI batch output file instead of calling a model")


def run(args: argparse.Namespace) -> int:
    from phaseaware.calibration.probes import ProbeSettings
    from phaseaware.errors import CalibrationError

    served = args.backend == "openai" or bool(args.ingest or args.emit_batch)
    if args.backend == "openai" and not args.tokenizer:
        raise CalibrationError("--backend openai needs --tokenizer (the served model's tokenizer)")
    if args.local_window is not None and args.local_window < 1:
        raise CalibrationError(f"--local-window must be >= 1 tokens, got {args.local_window}")
    if args.prompt_token_offset < 0:
        raise CalibrationError(
            f"--prompt-token-offset must be >= 0 (tokens the server adds, e.g. 1 for a BOS), "
            f"got {args.prompt_token_offset}"
        )
    if args.prompt_token_offset and not served:
        raise CalibrationError(
            f"--prompt-token-offset applies to --backend openai and batch files only; "
            f"--backend {args.backend} sees exactly phaseaware's tokens"
        )
    reference = args.backend == "hf" and args.model is None
    defaults: dict[str, Any] = {"context_tokens": 1024}
    if reference:  # the shipped model's own protocol, as in `phaseaware demo`
        from phaseaware.reference import protocol

        defaults = {
            "context_tokens": protocol.CONTEXT_TOKENS,
            "distractors": protocol.DISTRACTORS,
            "depth": protocol.DEPTH,
            "sweeps": protocol.SWEEPS,
        }
    if args.sweeps is not None:
        defaults["sweeps"] = tuple(s.strip() for s in args.sweeps.split(",") if s.strip())
    if args.context_tokens is not None:
        defaults["context_tokens"] = args.context_tokens
    if args.distractors is not None:
        defaults["distractors"] = args.distractors
    if args.depth is not None:
        defaults["depth"] = args.depth
    settings = ProbeSettings(
        n_offsets=args.period if args.period is not None else args.max_period,
        base_prompts=args.base_prompts,
        seed=args.seed,
        max_tokens=args.max_tokens,
        **defaults,
    )
    if args.plan:
        return _plan(args, settings)
    return _calibrate(args, settings)


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


def _names(args: argparse.Namespace) -> tuple[str, str, str]:
    """(model display name, tokenizer spec, template)."""
    from phaseaware.calibration.backends.hf import default_tokenizer_spec, model_display_name

    if args.backend == "hf":
        name = model_display_name(args.model)
        spec = args.tokenizer or default_tokenizer_spec(args.model)
    else:
        name = args.model or args.backend
        spec = args.tokenizer or "reference"
    return name, spec, args.template or "hf"


def _plan(args: argparse.Namespace, settings: Any) -> int:
    from phaseaware.calibration.stats.plan import plan_calibration

    period = settings.n_offsets
    tokens = settings.context_tokens + settings.max_tokens
    if args.target_half_width is None and args.detect_gap is None:
        n_probes = settings.base_prompts * settings.probes_per_base
        cost = (
            None
            if args.price_per_million is None
            else n_probes * tokens * args.price_per_million / 1e6
        )
        doc = {
            "n_base_prompts": settings.base_prompts,
            "n_probes": n_probes,
            "total_tokens": n_probes * tokens,
            "estimated_cost": cost,
            "rationale": "as configured (--base-prompts); give --target-half-width or --detect-gap to size it",
        }
    else:
        plan = plan_calibration(
            period=period,
            target_half_width=args.target_half_width,
            detect_gap=args.detect_gap,
            tokens_per_probe=tokens,
            price_per_million_tokens=args.price_per_million,
            sweeps=settings.sweeps,
        )
        doc = {
            k: getattr(plan, k)
            for k in (
                "n_base_prompts",
                "n_probes",
                "total_tokens",
                "estimated_cost",
                "rationale",
                "half_width",
                "power",
            )
        }
    if args.json:
        print(json.dumps(doc, indent=2))
    else:
        print(
            f"base prompts: {doc['n_base_prompts']}\nprobes: {doc['n_probes']}\n"
            f"tokens: {doc['total_tokens']:,}"
        )
        if doc["estimated_cost"] is not None:
            print(f"estimated cost: {doc['estimated_cost']:.2f}")
        print(doc["rationale"])
    return 0


def _backend(args: argparse.Namespace, tokenizer: Any) -> Any:
    from phaseaware.errors import CalibrationError

    if args.backend == "hf":
        from phaseaware.calibration.backends.hf import load_hf_backend

        return load_hf_backend(args.model, tokenizer, threads=args.threads)
    if args.backend == "openai":
        if not args.base_url or not args.model:
            raise CalibrationError("--backend openai needs --base-url and --model")
        from phaseaware.calibration.backends.openai import OpenAIBackend

        return OpenAIBackend(
            args.base_url,
            args.model,
            endpoint=args.endpoint,
            concurrency=args.concurrency,
            timeout=args.timeout,
            max_retries=args.max_retries,
            prompt_token_offset=args.prompt_token_offset,
            expected_prompt_tokens_check=not args.no_prompt_token_check,
        )
    import importlib

    from phaseaware.calibration.backends.callable import CallableBackend

    module_name, _, attr = (args.model or "").partition(":")
    if not module_name or not attr:
        raise CalibrationError("--backend callable needs --model module:function")
    fn = getattr(importlib.import_module(module_name), attr)
    return CallableBackend(fn, name=args.model)


def _calibrate(args: argparse.Namespace, settings: Any) -> int:
    from phaseaware.calibration.runner import calibrate
    from phaseaware.layouts import get_layout
    from phaseaware.registry import profile_filename
    from phaseaware.tokenizers import load_tokenizer

    name, spec, template = _names(args)
    tokenizer = load_tokenizer(spec)
    layout = get_layout(template, tokenizer)
    out = Path(args.out) if args.out else DEFAULT_FOLDER / profile_filename(name)
    log = Path(args.log) if args.log else out.with_name(out.stem + ".calibration.jsonl")
    run = {
        "tokenizer": tokenizer,
        "layout": layout,
        "settings": settings,
        "model": name,
        "template": template,
        "log_path": log,
        "period": args.period,
        "fresh": args.fresh,
    }
    if args.emit_batch:
        from phaseaware.cli.calibrate_batch import emit

        return emit(args, run)
    if args.ingest:
        from phaseaware.cli.calibrate_batch import ingest

        return ingest(args, run, out)
    backend = _backend(args, tokenizer)
    if args.local_window is not None:
        info = dict(getattr(backend, "model_info", None) or {})
        backend.model_info = {**info, "local_window": args.local_window}
    progress = _Progress()
    try:
        result = calibrate(
            backend=backend,
            out_path=out,
            progress=progress,
            position_offset=args.prompt_token_offset,
            **run,
        )
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
    from phaseaware.cli.calibrate_report import print_report

    print_report(result, as_json=args.json, plot=args.plot)
    return 0


class _Progress:
    """A plain progress bar with ETA on stderr; silent when stderr is not a TTY."""

    def __init__(self) -> None:
        self.tty = sys.stderr.isatty()
        self.start = time.monotonic()
        self.first_done: int | None = None
        self.done = self.total = 0

    def __call__(self, done: int, total: int, record: Any) -> None:
        if self.first_done is None:
            self.first_done, self.start = done, time.monotonic()
        self.done, self.total = done, total
        if not self.tty:
            return
        ran = done - self.first_done
        elapsed = time.monotonic() - self.start
        eta = elapsed / ran * (total - done) if ran else float("nan")
        width = 30
        filled = int(width * done / max(total, 1))
        eta_text = "--" if eta != eta else f"{eta:.0f}s"
        sys.stderr.write(
            f"\r[{'#' * filled}{'.' * (width - filled)}] {done}/{total} ETA {eta_text} "
        )
        sys.stderr.flush()

    def finish(self) -> None:
        if self.tty:
            sys.stderr.write("\n")
        elapsed = time.monotonic() - self.start
        print(
            f"calibrate: {self.done}/{self.total} probes done ({elapsed:.1f}s this run)",
            file=sys.stderr,
        )
