"""The demo end to end on the shipped reference model: calibrate, then compare assemblies.

1. calibrate the reference model (a residue sweep, resumable log, profile);
2. answer held-out RAG questions with the same retrieved chunks arranged three
   ways (retrieval order, lost-in-the-middle, phase-aware) and score them with
   95% intervals and the tokens each used.

:func:`run_demo` returns a :class:`DemoResult`; it prints nothing itself, but
reports its stages to ``on_stage`` and the finished calibration to
``on_calibrated`` (the CLI prints them as they happen). ``phaseaware demo`` and
``benchmarks/reference.py`` both call it.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from phaseaware.calibration.backends.base import ProbeRequest
from phaseaware.calibration.backends.hf import HFBackend, load_hf_backend
from phaseaware.calibration.probes import ProbeSettings
from phaseaware.calibration.report import summary_dict
from phaseaware.calibration.runner import CalibrationResult, calibrate
from phaseaware.chat.layout import conversation_layout
from phaseaware.demo.evaluate import StrategyResult, evaluate_strategies
from phaseaware.demo.rag_questions import make_questions, without_evidence
from phaseaware.errors import InputError
from phaseaware.profiles.model import Profile
from phaseaware.reference import protocol
from phaseaware.reference.load import reference_model_source
from phaseaware.reference.paths import MODEL_NAME
from phaseaware.tokenizers import load_tokenizer
from phaseaware.tokenizers.base import Tokenizer

__all__ = [
    "DEFAULT_OUT",
    "CHUNKS_PER_QUESTION",
    "MAX_FILLER_SENTENCES",
    "BUDGET_TOKENS",
    "DemoSettings",
    "DemoResult",
    "run_demo",
    "strategy_summary",
]

DEFAULT_OUT = Path("phaseaware-demo")
# The RAG questions: 5 retrieved chunks, each a sentence tail, 1..8 filler
# sentences and one fact (about 280 tokens a prompt); the budget admits them all.
# Calibration probes the same (phaseaware.reference.protocol).
CHUNKS_PER_QUESTION = 5
MAX_FILLER_SENTENCES = 8
BUDGET_TOKENS = 512
# A seed stream disjoint from calibration's, so the questions are held out.
_QUESTION_SEED_BASE = 10_000


@dataclass(frozen=True)
class DemoSettings:
    """``questions``: held-out RAG questions; ``base_prompts``: calibration base prompts
    (x 8 residues x 2 sweeps); ``context_tokens``: calibration prompt size (``None``:
    the reference protocol's 300); ``out``: folder for the log and the profile;
    ``fresh``: discard an earlier calibration log; ``evidence_strings``: false drops the
    chunks' evidence strings, so assembly finds key tokens from the question alone."""

    questions: int = 400
    base_prompts: int = 40
    context_tokens: int | None = None
    seed: int = 0
    out: Path = DEFAULT_OUT
    fresh: bool = False
    evidence_strings: bool = True

    def __post_init__(self) -> None:
        if self.questions < 1 or self.base_prompts < 2:
            raise InputError("--questions must be >= 1 and --base-prompts >= 2")

    def probe_settings(self) -> ProbeSettings:
        return ProbeSettings(
            context_tokens=self.context_tokens or protocol.CONTEXT_TOKENS,
            n_offsets=8,
            base_prompts=self.base_prompts,
            sweeps=protocol.SWEEPS,
            seed=self.seed,
            max_tokens=2,
            distractors=protocol.DISTRACTORS,
            depth=protocol.DEPTH,
        )


@dataclass(frozen=True)
class DemoResult:
    """The calibration and one :class:`StrategyResult` per strategy, in order."""

    calibration: CalibrationResult
    strategies: tuple[StrategyResult, ...]
    questions: int

    def summary(self) -> dict[str, Any]:
        """JSON-safe summary: ``{"calibration": ..., "rag": [one dict per strategy]}``."""
        return {
            "calibration": summary_dict(self.calibration),
            "rag": [strategy_summary(r) for r in self.strategies],
        }


def strategy_summary(row: StrategyResult) -> dict[str, Any]:
    """The JSON fields of one strategy's result (fractions 0..1, tokens)."""
    # TODO(lead): phaseaware.serialize once it can include properties (accuracy, overhead)
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


def run_demo(
    settings: DemoSettings,
    *,
    on_stage: Callable[[str], None] | None = None,
    on_calibrated: Callable[[CalibrationResult], None] | None = None,
) -> DemoResult:
    """Calibrate the reference model, then answer the held-out questions three ways."""
    stage = on_stage or (lambda message: None)
    _prepare_out(settings.out)  # before the model loads: a bad --out fails at once
    tokenizer = load_tokenizer("reference")
    backend = load_hf_backend(reference_model_source(), tokenizer, threads=1)
    try:
        calibration = _calibrate(settings, tokenizer, backend, stage)
        if on_calibrated is not None:
            on_calibrated(calibration)
        rows = _evaluate(settings, calibration.profile, tokenizer, backend, stage)
    finally:
        backend.close()
    return DemoResult(calibration=calibration, strategies=tuple(rows), questions=settings.questions)


def _prepare_out(out: Path) -> None:
    """Create the output folder ``out``; ``FilePathError`` naming it when it cannot be one."""
    from phaseaware.atomic import check_output_path
    from phaseaware.errors import FilePathError

    if out.exists() and not out.is_dir():
        raise FilePathError(
            f"--out {out} is a file, not a folder: --out names the folder for the "
            "calibration log and the profile; choose a folder (it is created if missing)"
        )
    try:
        out.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise FilePathError(
            f"--out {out}: cannot create the folder ({exc.strerror or exc}); choose another"
        ) from None
    for name in (f"{MODEL_NAME}.calibration.jsonl", f"{MODEL_NAME}.json"):
        check_output_path(out / name)


def _calibrate(
    settings: DemoSettings,
    tokenizer: Tokenizer,
    backend: HFBackend,
    stage: Callable[[str], None],
) -> CalibrationResult:
    settings.out.mkdir(parents=True, exist_ok=True)
    probes = settings.probe_settings()
    stage(
        f"[1/2] calibrating {MODEL_NAME} ({probes.base_prompts} x {probes.probes_per_base} probes)"
    )
    return calibrate(
        backend=backend,
        tokenizer=tokenizer,
        layout=conversation_layout(tokenizer=tokenizer, chat_format="hf"),
        settings=probes,
        model=MODEL_NAME,
        template="hf",
        log_path=settings.out / f"{MODEL_NAME}.calibration.jsonl",
        period=8,
        out_path=settings.out / f"{MODEL_NAME}.json",
        fresh=settings.fresh,
    )


def _evaluate(
    settings: DemoSettings,
    profile: Profile,
    tokenizer: Tokenizer,
    backend: HFBackend,
    stage: Callable[[str], None],
) -> list[StrategyResult]:
    questions = make_questions(
        count=settings.questions,
        seed=_QUESTION_SEED_BASE + settings.seed,
        chunks_per_question=CHUNKS_PER_QUESTION,
        max_filler_sentences=MAX_FILLER_SENTENCES,
    )
    if not settings.evidence_strings:
        questions = without_evidence(questions)

    def answer(prompt: str, prompt_tokens: int) -> str:
        request = ProbeRequest(
            probe_id="rag", prompt=prompt, prompt_tokens=prompt_tokens, answer=""
        )
        return next(iter(backend.complete([request]))).text

    stage(f"[2/2] answering {len(questions)} held-out RAG questions x 3 strategies")
    return evaluate_strategies(
        questions,
        answer=answer,
        tokenizer=tokenizer,
        chat_format=conversation_layout(tokenizer=tokenizer, chat_format="hf"),
        profile=profile,
        budget_tokens=BUDGET_TOKENS,
    )
