"""``phaseaware demo``: the whole story on the shipped reference model.

1. calibrate the reference model (a residue sweep, resumable log, profile);
2. answer held-out RAG questions with the same retrieved chunks arranged three
   ways (retrieval order, lost-in-the-middle, phase-aware) and print accuracy
   with 95% intervals and the tokens each used.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import Any

NAME = "demo"
HELP = "Calibrate the shipped reference model, then compare RAG assembly strategies on it."

DEFAULT_OUT = Path("phaseaware-demo")
# The RAG questions: 5 retrieved chunks, each a sentence tail, 1..8 filler
# sentences and one fact (about 280 tokens a prompt); the budget admits them all.
# Calibration probes the same (phaseaware.reference.protocol).
CHUNKS_PER_QUESTION = 5
MAX_FILLER_SENTENCES = 8
BUDGET_TOKENS = 512


def configure(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--questions", type=int, default=400, help="held-out RAG questions")
    parser.add_argument(
        "--base-prompts", type=int, default=40, help="calibration base prompts (x 8 residues)"
    )
    parser.add_argument(
        "--context-tokens",
        type=int,
        default=None,
        help="calibration prompt size (default 300, about that of the RAG prompts)",
    )
    parser.add_argument("--seed", type=int, default=0, help="seed for probes and questions")
    parser.add_argument(
        "--out", type=Path, default=DEFAULT_OUT, help="folder for the log and the profile"
    )
    parser.add_argument("--fresh", action="store_true", help="discard an earlier calibration log")
    parser.add_argument("--json", action="store_true", help="print one JSON document at the end")


def run(args: argparse.Namespace) -> int:
    from phaseaware.errors import InputError

    if args.questions < 1 or args.base_prompts < 2:
        raise InputError("--questions must be >= 1 and --base-prompts >= 2")
    from phaseaware.calibration.backends.hf import load_hf_backend
    from phaseaware.tokenizers import load_tokenizer

    tokenizer = load_tokenizer("reference")
    backend = load_hf_backend(None, tokenizer, threads=1)
    try:
        calibration = _calibrate(args, tokenizer, backend)
        rows = _evaluate(args, calibration.profile, tokenizer, backend)
    finally:
        backend.close()
    if args.json:
        from phaseaware.cli.calibrate_report import summary_dict

        doc = {
            "calibration": summary_dict(calibration),
            "rag": [_row_dict(r) for r in rows],
        }
        print(json.dumps(doc, indent=2))
    else:
        _print_rag(rows, questions=args.questions)
    return 0


def _calibrate(args: argparse.Namespace, tokenizer: Any, backend: Any) -> Any:
    from phaseaware.calibration.probes import ProbeSettings
    from phaseaware.calibration.runner import calibrate
    from phaseaware.cli.calibrate_report import print_report
    from phaseaware.layouts import get_layout
    from phaseaware.reference import protocol
    from phaseaware.reference.paths import MODEL_NAME

    args.out.mkdir(parents=True, exist_ok=True)
    settings = ProbeSettings(
        context_tokens=args.context_tokens or protocol.CONTEXT_TOKENS,
        n_offsets=8,
        base_prompts=args.base_prompts,
        sweeps=protocol.SWEEPS,
        seed=args.seed,
        max_tokens=2,
        distractors=protocol.DISTRACTORS,
        depth=protocol.DEPTH,
    )
    print(
        f"[1/2] calibrating {MODEL_NAME} ({settings.base_prompts} x {settings.probes_per_base} "
        "probes)",
        file=sys.stderr,
    )
    result = calibrate(
        backend=backend,
        tokenizer=tokenizer,
        layout=get_layout("hf", tokenizer),
        settings=settings,
        model=MODEL_NAME,
        template="hf",
        log_path=args.out / f"{MODEL_NAME}.calibration.jsonl",
        period=8,
        out_path=args.out / f"{MODEL_NAME}.json",
        fresh=args.fresh,
    )
    if not args.json:
        print_report(result)
    return result


def _evaluate(args: argparse.Namespace, profile: Any, tokenizer: Any, backend: Any) -> list[Any]:
    from phaseaware.calibration.backends.base import ProbeRequest
    from phaseaware.demo.evaluate import evaluate_strategies
    from phaseaware.demo.rag_questions import make_questions
    from phaseaware.layouts import get_layout

    # A seed stream disjoint from calibration's, so the questions are held out.
    questions = make_questions(
        count=args.questions,
        seed=10_000 + args.seed,
        chunks_per_question=CHUNKS_PER_QUESTION,
        max_filler_sentences=MAX_FILLER_SENTENCES,
    )

    def answer(prompt: str, prompt_tokens: int) -> str:
        request = ProbeRequest(
            probe_id="rag", prompt=prompt, prompt_tokens=prompt_tokens, answer=""
        )
        return next(iter(backend.complete([request]))).text

    print(
        f"[2/2] answering {len(questions)} held-out RAG questions x 3 strategies", file=sys.stderr
    )
    return evaluate_strategies(
        questions,
        answer=answer,
        tokenizer=tokenizer,
        layout=get_layout("hf", tokenizer),
        profile=profile,
        budget_tokens=BUDGET_TOKENS,
    )


def _row_dict(row: Any) -> dict[str, Any]:
    return {
        "strategy": row.strategy,
        "accuracy": row.accuracy,
        "ci_low": row.ci_low,
        "ci_high": row.ci_high,
        "correct": row.correct,
        "total": row.total,
        "mean_prompt_tokens": row.mean_prompt_tokens,
        "padding_overhead": row.padding_overhead,
        "expected_accuracy": row.expected_accuracy,
    }


def _print_rag(rows: list[Any], *, questions: int) -> None:
    print(f"\nHeld-out RAG questions ({questions}), exact match, 95% Wilson intervals:")
    print(f"  {'strategy':<20} {'accuracy':>9} {'95% CI':>16} {'tokens/prompt':>14} {'padding':>8}")
    for r in rows:
        ci = f"{100 * r.ci_low:.1f}–{100 * r.ci_high:.1f}%"
        print(
            f"  {r.strategy:<20} {100 * r.accuracy:>8.1f}% {ci:>16} "
            f"{r.mean_prompt_tokens:>14.1f} {100 * r.padding_overhead:>7.2f}%"
        )
