"""The demo end to end on the shipped reference model: calibrate, then ``compare``.

1. calibrate the reference model (a residue sweep, resumable log, profile);
2. run :mod:`phaseaware.compare` on the shipped held-out RAG questions with the
   same retrieved chunks arranged five ways (retrieval order,
   lost-in-the-middle, phase-aware with the new profile, and the controls
   order-only and placebo): accuracy with 95% intervals, the paired tests, where
   the evidence landed, the tokens each used and the verdict. Answers are logged
   next to the profile (one log per comparison, named by its fingerprint), so a
   second run reuses them.

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

from phaseaware.calibration.backends.base import Backend
from phaseaware.calibration.backends.hf import load_hf_backend
from phaseaware.calibration.probes import ProbeSettings
from phaseaware.calibration.report import summary_dict
from phaseaware.calibration.runner import CalibrationResult, calibrate
from phaseaware.chat.layout import conversation_layout
from phaseaware.compare.arrange import Arranger
from phaseaware.compare.grade import load_grader
from phaseaware.compare.log import fingerprint
from phaseaware.compare.report import ArrangementRow, CompareReport, compare_report
from phaseaware.compare.run import CompareSettings, comparison_settings, run_compare
from phaseaware.demo.questions_file import (
    BUDGET_TOKENS,
    CHUNKS_PER_QUESTION,
    MAX_FILLER_SENTENCES,
    demo_questions,
)
from phaseaware.errors import InputError
from phaseaware.reference import probe_defaults
from phaseaware.reference.load import reference_model_source
from phaseaware.reference.paths import MODEL_NAME
from phaseaware.tokenizers import load_tokenizer
from phaseaware.tokenizers.base import Tokenizer

__all__ = [
    "DEFAULT_OUT",
    "CHUNKS_PER_QUESTION",
    "MAX_FILLER_SENTENCES",
    "BUDGET_TOKENS",
    "ANSWER_TOKENS",
    "DemoSettings",
    "DemoResult",
    "answer_log",
    "run_demo",
    "strategy_summary",
]

DEFAULT_OUT = Path("phaseaware-demo")
ANSWER_TOKENS = 8  # tokens generated per answer: the number, then end of turn
# what a demo log's name fingerprinted before the controls existed (such a log resumes)
ARRANGEMENTS_BEFORE_CONTROLS = ("naive", "lost-in-the-middle", "phase-aware")
CHAT_FORMAT = "hf"


@dataclass(frozen=True)
class DemoSettings:
    """``questions``: held-out RAG questions; ``base_prompts``: calibration base prompts
    (x 8 residues x 2 sweeps); ``context_tokens``: calibration prompt size (``None``:
    the reference model's probe defaults: 300); ``out``: folder for the logs and the profile;
    ``fresh``: discard earlier calibration and answer logs; ``evidence_strings``: false
    drops the chunks' evidence strings, so assembly finds key tokens from the question alone."""

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
            context_tokens=self.context_tokens or probe_defaults.CONTEXT_TOKENS,
            n_offsets=8,
            base_prompts=self.base_prompts,
            sweeps=probe_defaults.SWEEPS,
            seed=self.seed,
            max_tokens=2,
            distractors=probe_defaults.DISTRACTORS,
            depth=probe_defaults.DEPTH,
        )


@dataclass(frozen=True)
class DemoResult:
    """The calibration and the comparison of the arrangements."""

    calibration: CalibrationResult
    comparison: CompareReport
    questions: int

    @property
    def strategies(self) -> tuple[ArrangementRow, ...]:
        return self.comparison.rows

    def summary(self) -> dict[str, Any]:
        """JSON-safe: ``{"calibration": ..., "rag": [one dict per arrangement], "compare":
        the full comparison report}``."""
        return {
            "calibration": summary_dict(self.calibration),
            "rag": [strategy_summary(r) for r in self.comparison.rows],
            "compare": self.comparison.to_dict(),
        }


def strategy_summary(row: ArrangementRow) -> dict[str, Any]:
    """The JSON fields of one arrangement's result (fractions 0..1, tokens)."""
    return {
        "strategy": row.arrangement,
        "accuracy": row.accuracy,
        "ci_low": row.ci_low,
        "ci_high": row.ci_high,
        "correct": row.correct,
        "total": row.total,
        "mean_prompt_tokens": row.mean_prompt_tokens,
        "padding_overhead": row.added_tokens_share,
        "expected_accuracy": row.expected_accuracy,
    }


def run_demo(
    settings: DemoSettings,
    *,
    on_stage: Callable[[str], None] | None = None,
    on_calibrated: Callable[[CalibrationResult], None] | None = None,
    on_progress: Callable[[str, int, int], None] | None = None,
) -> DemoResult:
    """Calibrate the reference model, then compare the arrangements on it.

    ``on_stage``: one line per step, saying whether it runs, resumes or reuses a saved
    log; ``on_progress(step, done, total)``: progress within a step ("calibrate",
    "compare"), probes or answers."""
    stage = on_stage or (lambda message: None)
    progress = on_progress or (lambda step, done, total: None)
    _prepare_out(settings.out)  # before the model loads: a bad --out fails at once
    tokenizer = load_tokenizer("reference")
    backend = load_hf_backend(reference_model_source(), tokenizer, threads=1)
    try:
        calibration = _calibrate(settings, tokenizer, backend, stage, progress)
        if on_calibrated is not None:
            on_calibrated(calibration)
        report = _compare(settings, calibration, tokenizer, backend, stage, progress)
    finally:
        backend.close()
    return DemoResult(calibration=calibration, comparison=report, questions=settings.questions)


def _announce(
    stage: Callable[[str], None],
    progress: Callable[[str, int, int], None],
    *,
    step: str,
    running: str,
    log: Path,
    unit: str,
    noun: str,
) -> Callable[[int, int, object], None]:
    """A runner progress callback whose first call says whether the step runs afresh,
    resumes its log, or reuses it whole (then nothing is run: ``--fresh`` redoes it)."""
    said = False

    def report(done: int, total: int, record: object) -> None:
        nonlocal said
        if not said:
            said = True
            number = running.split()[0]  # "[1/2]"
            if total and done >= total:
                stage(f"{number} reusing the saved {noun} in {log} (--fresh redoes it)")
            elif done:
                stage(f"{number} resuming the {noun} in {log} ({done} of {total} {unit} saved)")
            else:
                stage(running)
        progress(step, done, total)

    return report


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
    backend: Backend,
    stage: Callable[[str], None],
    progress: Callable[[str, int, int], None],
) -> CalibrationResult:
    settings.out.mkdir(parents=True, exist_ok=True)
    probes = settings.probe_settings()
    log = settings.out / f"{MODEL_NAME}.calibration.jsonl"
    running = (
        f"[1/2] calibrating {MODEL_NAME} ({probes.base_prompts} x {probes.probes_per_base} probes)"
    )
    return calibrate(
        backend=backend,
        tokenizer=tokenizer,
        layout=conversation_layout(tokenizer=tokenizer, chat_format=CHAT_FORMAT),
        settings=probes,
        model=MODEL_NAME,
        chat_format=CHAT_FORMAT,
        log_path=log,
        period=8,
        out_path=settings.out / f"{MODEL_NAME}.json",
        fresh=settings.fresh,
        progress=_announce(
            stage,
            progress,
            step="calibrate",
            running=running,
            log=log,
            unit="probes",
            noun="calibration",
        ),
    )


def answer_log(out: Path, identity: dict[str, Any]) -> Path:
    """One answer log per comparison (other --questions, --seed or profile: another file),
    each resumable; the calibration log beside it is shared. A log named before the
    controls (its name fingerprinted the three arrangements then run) is resumed."""

    def named(settings: dict[str, Any]) -> Path:
        tag = fingerprint(settings).removeprefix("sha256:")[:12]
        return out / f"{MODEL_NAME}.compare-{tag}.jsonl"

    log = named(identity)
    earlier = named({**identity, "arrangements": list(ARRANGEMENTS_BEFORE_CONTROLS)})
    return earlier if not log.exists() and earlier.exists() else log


def _compare(
    settings: DemoSettings,
    calibration: CalibrationResult,
    tokenizer: Tokenizer,
    backend: Backend,
    stage: Callable[[str], None],
    progress: Callable[[str, int, int], None],
) -> CompareReport:
    questions = demo_questions(
        count=settings.questions, seed=settings.seed, evidence_strings=settings.evidence_strings
    )
    compare_settings = CompareSettings(
        budget_tokens=BUDGET_TOKENS, max_tokens=ANSWER_TOKENS, questions_per_group=1
    )
    arranger = Arranger(
        tokenizer=tokenizer,
        chat_format=CHAT_FORMAT,
        profile=calibration.profile,
        budget_tokens=BUDGET_TOKENS,
    )
    running = (
        f"[2/2] phaseaware compare: {len(questions)} held-out RAG questions x "
        f"{len(compare_settings.arrangements)} arrangements"
    )
    identity = comparison_settings(
        questions=questions,
        arranger=arranger,
        settings=compare_settings,
        model=MODEL_NAME,
        chat_format=CHAT_FORMAT,
        backend=backend.name,
    )
    log = answer_log(settings.out, identity)
    run = run_compare(
        questions=questions,
        backend=backend,
        arranger=arranger,
        settings=compare_settings,
        model=MODEL_NAME,
        chat_format=CHAT_FORMAT,
        log_path=log,
        fresh=settings.fresh,
        progress=_announce(
            stage,
            progress,
            step="compare",
            running=running,
            log=log,
            unit="answers",
            noun="answers of this comparison",
        ),
    )
    return compare_report(
        run,
        questions=questions,
        grader=load_grader("exact"),
        grader_name="exact",
        period=calibration.profile.period,
        arrangements=compare_settings.arrangements,
    )
