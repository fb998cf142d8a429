"""``phaseaware compare``: naive vs phase-aware assembly on your own questions.

Reads a JSONL file (one question a line: ``question``, ``chunks`` with
``text``/``score``/``id``/optional ``evidence``, ``answer``: a string or a list,
optional ``system``), assembles each question five ways at the same token
budget (retrieval order, lost-in-the-middle, phase-aware with ``--profile``, and
the controls order-only and placebo; ``--arrangements`` picks some), asks the
model through a calibration backend (``--backend openai``: any OpenAI-compatible
server; ``hf``: a local transformers model, the reference model by default;
``callable``: ``module:function``), grades every answer and prints accuracy per
arrangement beside the profile's prediction, the paired tests, where the evidence
landed and the verdict: the gain, and whether the order or phase placement
carried it. Answers are logged as they arrive; re-running resumes.
"""

from __future__ import annotations

import argparse
import json
import re
import sys
from pathlib import Path
from typing import Any

from phaseaware.cli.argtypes import fraction, integer
from phaseaware.cli.flags import add_chat_format, add_openai_backend
from phaseaware.limits import MAX_TOKENS

NAME = "compare"
HELP = "Compare naive and phase-aware assembly on your own questions (accuracy, paired test)."
DEFAULT_FOLDER = Path("phaseaware-compare")


def configure(parser: argparse.ArgumentParser) -> None:
    add = parser.add_argument
    add("questions", nargs="?", help="questions file (JSONL, one question a line)")
    add(
        "--reference-questions",
        action="store_true",
        help="use the reference model's held-out RAG questions shipped with phaseaware "
        "(what `phaseaware demo` answers)",
    )
    add("--profile", required=True, help="profile name or file for the phase-aware arrangement")
    add(
        "--budget-tokens",
        type=integer(16, MAX_TOKENS),
        required=True,
        help="prompt tokens every arrangement may use, template included",
    )
    add("--backend", choices=("hf", "openai", "callable"), default="openai", help="model backend")
    add(
        "--model",
        help="openai: served model name; hf: folder, hf:<name> or .gguf (default: the "
        "reference model); callable: module:function",
    )
    add("--tokenizer", help="tokenizer spec (required for openai: the served model's)")
    add_chat_format(parser, help="chat format: none, chatml, hf, deepseek-v4, ... (default hf)")
    add = parser.add_argument_group("answers, grading and output").add_argument
    add(
        "--grader",
        default="exact",
        help="exact (default: the completion's first line, normalised), contains, regex or "
        "module:function",
    )
    add(
        "--max-tokens",
        type=integer(1, 100_000),
        default=16,
        help="tokens generated per answer: room for a short answer (exact grades the first "
        "line; a model that goes on past its answer only costs time)",
    )
    add("--repeat", action="store_true", help="phase-aware also restates the top evidence")
    add(
        "--arrangements",
        help="comma-separated subset to run, e.g. naive,phase-aware,placebo (default: all of "
        "naive, lost-in-the-middle, phase-aware and the controls order-only, placebo)",
    )
    add("--alpha", type=fraction(low_open=True), default=0.05, help="test level (default 0.05)")
    add(
        "--log",
        help="answer log (JSONL); default ./phaseaware-compare/<model>.<questions>.compare.jsonl "
        "(one log per model and questions file)",
    )
    add("--fresh", action="store_true", help="discard the log and start over")
    add("--json", action="store_true", help="print one JSON document")
    add("--plot", help="save accuracy and evidence-residue charts (needs matplotlib)")
    served = parser.add_argument_group("--backend openai (an OpenAI-compatible server)")
    add = served.add_argument
    add_openai_backend(
        served, concurrency_help="requests in flight (questions sent together; default 4)"
    )
    add(
        "--prompt-token-offset",
        type=int,
        default=0,
        help="openai: tokens the server adds before each prompt itself (e.g. 1 for a BOS)",
    )
    add(
        "--no-prompt-token-check",
        action="store_true",
        help="openai: do not compare usage.prompt_tokens with phaseaware's count (unsafe)",
    )
    add = parser.add_argument_group("--backend hf (a local transformers model)").add_argument
    add("--threads", type=integer(1, 4096), default=1, help="--backend hf: torch CPU threads")


def _questions(args: argparse.Namespace) -> Any:
    from phaseaware.compare.questions import read_questions

    if args.reference_questions:
        from phaseaware.demo.questions_file import reference_questions

        return reference_questions()
    return read_questions(args.questions)


def _check(args: argparse.Namespace) -> None:
    from phaseaware.assembly.inputs.options import check_position_offset
    from phaseaware.atomic import check_output_path, refuse_outputs_over_inputs, refuse_same_file
    from phaseaware.cli.run_inputs import compare_inputs
    from phaseaware.errors import InputError
    from phaseaware.extras import require_extra
    from phaseaware.plots import plot_format

    if bool(args.questions) == bool(args.reference_questions):
        raise InputError("pass a questions file (JSONL) or --reference-questions (one of them)")
    require_extra(modules=("scipy",), extra="stats", what="compare's statistics")
    if args.plot:
        require_extra(modules=("matplotlib",), extra="plot", what="--plot")
    if args.backend == "openai":
        require_extra(modules=("openai",), extra="openai", what="--backend openai")
        if not (args.tokenizer and args.base_url and args.model):
            raise InputError(
                "--backend openai needs --base-url, --model and --tokenizer (the served "
                "model's tokenizer, so positions are exact)"
            )
    elif args.backend == "hf":
        require_extra(
            modules=("torch", "safetensors", "transformers"), extra="torch", what="--backend hf"
        )
    check_position_offset(args.prompt_token_offset, name="--prompt-token-offset", error=InputError)
    if args.prompt_token_offset and args.backend != "openai":
        raise InputError("--prompt-token-offset applies to --backend openai only")
    outputs = {k: v for k, v in {"--log": args.log, "--plot": args.plot}.items() if v}
    for flag, value in outputs.items():
        check_output_path(value)
        others = {k: v for k, v in outputs.items() if k != flag}
        if args.questions:
            others["questions file"] = args.questions
        refuse_same_file(value, others, output_name=flag)
    log = args.log or None  # the default log lives in its own folder
    refuse_outputs_over_inputs({"--log": log, "--plot": args.plot}, compare_inputs(args))
    if args.plot:
        plot_format(args.plot)  # an unknown extension fails now, not after every request


def _arrangements(args: argparse.Namespace) -> tuple[str, ...]:
    from phaseaware.compare.arrange import ARRANGEMENTS, parse_arrangements

    return ARRANGEMENTS if args.arrangements is None else parse_arrangements(args.arrangements)


def run(args: argparse.Namespace) -> int:
    _check(args)
    _arrangements(args)  # a bad name fails before the model loads
    from phaseaware.compare.grade import check_regex_answers, load_grader

    questions = _questions(args)
    grader = load_grader(args.grader)
    if args.grader == "regex":
        for q in questions:
            check_regex_answers(q.answers, where=f"question {q.id}")
    backend, tokenizer, name = _backend(args)
    try:
        report = compare(args, questions, grader, backend, tokenizer, name)
    finally:
        backend.close()
    if args.plot:
        from phaseaware.compare.report import save_plot

        save_plot(report, args.plot)
    print(json.dumps(report.to_dict(), indent=2) if args.json else report.text())
    return 0


def _backend(args: argparse.Namespace) -> tuple[Any, Any, str]:
    from phaseaware.calibration.backends.factory import BackendOptions, make_backend, run_names
    from phaseaware.cli.api_keys import api_key_from_args
    from phaseaware.cli.flags import check_openai_server
    from phaseaware.endpoints.request_settings import chat_template_kwargs
    from phaseaware.errors import InputError
    from phaseaware.tokenizers import load_tokenizer

    options = BackendOptions(
        kind=args.backend,
        model=args.model,
        threads=args.threads,
        base_url=args.base_url,
        endpoint=args.endpoint,
        concurrency=args.concurrency,
        timeout=args.timeout,
        max_retries=args.max_retries,
        prompt_token_offset=args.prompt_token_offset,
        prompt_token_check=not args.no_prompt_token_check,
        api_key=api_key_from_args(
            args, error=InputError, env_name="PHASEAWARE_API_KEY", read_env=False
        )
        if args.backend == "openai"
        else None,
    )
    if args.backend == "openai":  # 3 s, before any work: not the client's minute of retries
        check_openai_server(args.base_url, api_key=options.api_key)
    default_model = None
    if args.backend == "hf" and args.model is None:
        from phaseaware.reference.load import reference_model_source

        default_model = reference_model_source()
    name, spec = run_names(options, tokenizer=args.tokenizer, default_model=default_model)
    tokenizer = load_tokenizer(spec)
    backend = make_backend(
        options,
        tokenizer,
        default_model=default_model,
        chat_template_kwargs=chat_template_kwargs(chat_format=args.chat_format or "hf"),
    )
    return backend, tokenizer, name


def default_log(model: str, questions: str | None) -> Path:
    """``./phaseaware-compare/<model>.<questions file stem>.compare.jsonl``: a second
    questions file gets its own log (``--reference-questions``: ``reference``)."""
    from phaseaware.profiles.registry import profile_filename

    safe = re.sub(r"[^A-Za-z0-9.+-]+", "-", Path(questions).stem).strip("-.") if questions else ""
    stem = safe or ("questions" if questions else "reference")
    return DEFAULT_FOLDER / f"{Path(profile_filename(model)).stem}.{stem}.compare.jsonl"


def compare(
    args: argparse.Namespace, questions: Any, grader: Any, backend: Any, tokenizer: Any, name: str
) -> Any:
    import warnings

    from phaseaware.cli.calibrate_output import Progress
    from phaseaware.compare.arrange import Arranger
    from phaseaware.compare.mismatch import profile_mismatches
    from phaseaware.compare.report import compare_report
    from phaseaware.compare.run import CompareSettings, run_compare
    from phaseaware.errors import PhaseawareWarning
    from phaseaware.profiles.registry import get_profile

    chat_format = args.chat_format or "hf"
    profile = get_profile(args.profile)
    arrangements = _arrangements(args)
    settings = CompareSettings(
        budget_tokens=args.budget_tokens,
        max_tokens=args.max_tokens,
        repeat=args.repeat,
        # enough questions per group to keep --concurrency requests in flight
        questions_per_group=-(-args.concurrency // len(arrangements)),
        arrangements=arrangements,
    )
    # said before the first request (the report repeats them): the run may be moot
    for line in profile_mismatches(
        profile, model=name, tokenizer=tokenizer, chat_format=chat_format
    ):
        warnings.warn(line, PhaseawareWarning, stacklevel=2)
    arranger = Arranger(
        tokenizer=tokenizer,
        chat_format=chat_format,
        profile=profile,
        budget_tokens=settings.budget_tokens,
        repeat=settings.repeat,
        position_offset=args.prompt_token_offset,
    )
    log = Path(args.log) if args.log else default_log(name, args.questions)
    progress = Progress(label="compare", unit="answers", log=log)
    try:
        result = run_compare(
            questions=questions,
            backend=backend,
            arranger=arranger,
            settings=settings,
            model=name,
            chat_format=chat_format,
            log_path=log,
            fresh=args.fresh,
            progress=progress,
        )
    except KeyboardInterrupt:
        progress.finish()
        print(
            f"phaseaware: interrupted; answers so far are saved in {log}; run the same command "
            "again to resume",
            file=sys.stderr,
        )
        raise SystemExit(130) from None
    progress.finish()
    return compare_report(
        result,
        questions=questions,
        grader=grader,
        grader_name=args.grader,
        period=profile.period,
        arrangements=settings.arrangements,
        alpha=args.alpha,
    )
