"""``phaseaware score``: an eval log's accuracy by key residue (where each needle sat).

Reads the per-sample log of a long-context eval (``--format``: lm-eval
``--log_samples``, RULER predictions, HELMET output, gkamradt NIAH results or a
plain JSONL), finds each needle in the exact prompt the model saw and reports
accuracy by ``key_position mod period`` with Wilson intervals, a chi-square test
of phase dependence, the same by prompt-length bucket, and every skipped sample
with its reason. ``--profile-out`` writes a profile that ``assemble`` uses like
a calibrated one. See docs/score.md.
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path
from typing import Any

from phaseaware.cli.argtypes import integer, number, period_or_auto, seconds
from phaseaware.cli.flags import add_chat_format
from phaseaware.limits import MAX_PERIOD, MAX_TOKENS

NAME = "score"
HELP = "Score an eval log (lm-eval, RULER, HELMET, NIAH, JSONL) by key residue."

FORMAT_NAMES = ("lm-eval", "ruler", "helmet", "niah", "opencompass", "jsonl")


def _regex(text: str) -> Any:
    from phaseaware.errors import InputError
    from phaseaware.regexes import compile_untrusted

    try:  # every search under a time limit: the needles are the log's text
        return compile_untrusted(text, source="--key-regex")
    except InputError as exc:
        raise argparse.ArgumentTypeError(str(exc)) from None


def configure(parser: argparse.ArgumentParser) -> None:
    add = parser.add_argument
    add("log", metavar="LOG", help="the eval log: a file, or a folder of them")
    add("--format", required=True, choices=FORMAT_NAMES, help="the log's harness")
    add("--tokenizer", required=True, help="the evaluated model's tokenizer spec")
    add_chat_format(
        parser,
        help="chat format that rendered message prompts (none, chatml, hf, deepseek-v4, "
        "deepseek-v4.1); text prompts are used as logged",
    )
    add("--thinking", action="store_true", help="chat setting: the thinking variant")
    add("--reasoning-effort", help="chat setting: reasoning effort the eval requested")
    add(
        "--server",
        metavar="URL",
        help="take message prompts' tokens from this server's /tokenize (e.g. "
        "http://127.0.0.1:8000/v1), for chats only the server renders; needs --model",
    )
    add("--model", help="model name: the served model (--server) and the profile's model")
    add(
        "--timeout",
        type=seconds(),
        default=30.0,
        help="--server: seconds per /tokenize attempt, connect to last byte (default 30; "
        "two retries)",
    )
    add(
        "--server-bos",
        choices=("auto", "always", "none"),
        default="auto",
        help="text prompts: the BOS a completions server adds in front. auto: one when "
        "the tokenizer has a BOS and the prompt does not start with it; always; none "
        "(default auto)",
    )
    add("--needle-field", help="dotted path of the needle text (default: the format's)")
    add("--correct-field", help="dotted path of the verdict (default: the format's metric)")
    add(
        "--pass-at",
        type=number(-1e12, 1e12),
        help="a numeric verdict counts as correct at >= this (default 1; NIAH 10)",
    )
    add(
        "--key-regex",
        type=_regex,
        help="the key is the first token of this match inside the needle (its first group "
        "if it has one) instead of the needle's first token",
    )
    add(
        "--max-line-mb",
        type=integer(1, 1 << 20),
        help="the largest JSONL line read, in MiB (default 256); its parse may take 4x that "
        "in memory, a longer or denser line is skipped",
    )
    add(
        "--max-document-mb",
        type=integer(1, 1 << 20),
        help="the largest JSON document (HELMET, NIAH) or NIAH context file read, in MiB "
        "(default 1024); its parse may take 4x that in memory",
    )
    add("--lm-eval-filter", help="lm-eval: the filter whose records to score")
    add("--contexts", help="niah: the saved-context folder (default: ../contexts)")
    add("--question", help="niah: the retrieval question asked (default: the harness's)")
    add(
        "--period",
        type=period_or_auto,
        default=8,
        help="residue period, or 'auto' to detect it as calibrate does (default 8)",
    )
    add(
        "--max-period",
        type=integer(4, MAX_PERIOD),
        default=16,
        help="--period auto: every period 2..N is tested on the key positions (default 16)",
    )
    add("--length-buckets", type=integer(1, 100), default=4, help="length buckets (default 4)")
    add("--json", action="store_true", help="print one JSON document")
    add("--plot", metavar="FILE", help="also save accuracy by residue as a chart (matplotlib)")
    add("--profile-out", metavar="FILE", help="write a phaseaware profile built from the eval")
    add(
        "--local-window",
        type=integer(1, MAX_TOKENS),
        help="--profile-out: the model's raw local window in tokens; samples whose key is "
        "within it of the prompt's end give the profile's in-window accuracy",
    )
    parser.epilog = (
        "The key token is the needle's first token (the token holding its first character), "
        "as calibrate defines its keys; positions are absolute, BOS = 0. A sample whose "
        "needle is absent, found twice, or cut off is skipped and counted with its reason."
    )


def _server_ids(args: argparse.Namespace, settings: Any) -> Any:
    from phaseaware.endpoints.probe import make_client
    from phaseaware.endpoints.request_settings import chat_template_kwargs
    from phaseaware.endpoints.tokenize import server_token_ids

    client = make_client(args.server, timeout=args.timeout)
    kwargs = chat_template_kwargs(
        chat_format=args.chat_format or "hf",
        thinking=settings.thinking,
        reasoning_effort=settings.reasoning_effort,
    )

    def ids(messages: Any) -> list[int]:
        return server_token_ids(
            client, args.model, base=args.server, messages=messages, kwargs=kwargs
        )

    return ids


def _locator(args: argparse.Namespace) -> Any:
    from phaseaware.chat.formats import get_chat_format
    from phaseaware.chat.settings import ChatSettings
    from phaseaware.scoring.locate import Locator
    from phaseaware.tokenizers import load_tokenizer

    tokenizer = load_tokenizer(args.tokenizer)
    settings = ChatSettings(thinking=args.thinking, reasoning_effort=args.reasoning_effort)
    chat = None
    if args.chat_format:
        chat = get_chat_format(args.chat_format, tokenizer, settings=settings)
    return Locator(
        tokenizer=tokenizer,
        chat_format=chat,
        server_ids=_server_ids(args, settings) if args.server else None,
        bos=args.server_bos,
        key_regex=args.key_regex,
    )


def _check_outputs(args: argparse.Namespace) -> None:
    """Before any work: outputs are writable files, distinct, and none of the run's inputs
    (``--profile-out LOG`` would replace the eval log it was built from)."""
    from phaseaware.atomic import check_output_path, refuse_outputs_over_inputs, refuse_same_file
    from phaseaware.cli.run_inputs import score_inputs
    from phaseaware.plots import plot_format

    outputs = {"--profile-out": args.profile_out, "--plot": args.plot}
    for value in outputs.values():
        if value:
            check_output_path(value)
    if args.profile_out and args.plot:
        refuse_same_file(args.plot, {"--profile-out": args.profile_out}, output_name="--plot")
    refuse_outputs_over_inputs(outputs, score_inputs(args))
    if args.plot:
        plot_format(args.plot)  # an unknown extension fails now, not after --profile-out


def run(args: argparse.Namespace) -> int:
    from phaseaware.errors import InputError
    from phaseaware.scoring.formats import ReadOptions
    from phaseaware.scoring.report import build_profile, format_report, save_plot, to_json
    from phaseaware.scoring.score import score_log

    if args.server and not args.model:
        raise InputError("--server needs --model (the served model's name)")
    if args.profile_out and not args.model:
        raise InputError("--profile-out needs --model (the model the profile describes)")
    if args.plot:  # before any work: a missing extra should not cost a whole scoring run
        from phaseaware.extras import require_extra

        require_extra(modules=("matplotlib",), extra="plot", what="--plot")
    _check_outputs(args)
    options = ReadOptions(
        needle_field=args.needle_field,
        correct_field=args.correct_field,
        pass_at=args.pass_at,
        contexts=Path(args.contexts) if args.contexts else None,
        question=args.question,
        lm_eval_filter=args.lm_eval_filter,
        max_line_bytes=None if args.max_line_mb is None else args.max_line_mb << 20,
        max_document_bytes=None if args.max_document_mb is None else args.max_document_mb << 20,
    )
    result = score_log(
        args.log,
        format=args.format,
        locator=_locator(args),
        options=options,
        period=args.period,
        max_period=args.max_period,
        length_buckets=args.length_buckets,
    )
    doc = to_json(result)
    if args.profile_out:
        from phaseaware.profiles.io import save_profile

        profile = build_profile(result, model=args.model, local_window=args.local_window)
        save_profile(profile, args.profile_out)
        doc["profile"] = args.profile_out
        doc["profile_lacks"] = profile.gaps()
    if args.plot:
        save_plot(result, args.plot)
    if args.json:
        print(json.dumps(doc, indent=2))
    else:
        print(format_report(result))
        if args.profile_out:
            print(f"profile: {args.profile_out}")
            for field_name, why in doc["profile_lacks"].items():
                print(f"  the profile lacks {field_name}: {why}")
    return 0
