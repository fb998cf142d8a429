"""What a comparison found: accuracy per arrangement, paired tests, where evidence landed.

* accuracy per arrangement, with 95% Wilson intervals, beside the profile's
  prediction for it (the mean expected accuracy of the top evidence where it landed,
  read with the run's profile: the placebo's too);
* paired by question (exact McNemar, ``scipy``): phase-aware against every other
  arrangement, and order-only against naive; wins (right only with the first),
  losses (right only with the second), the observed difference beside the one the
  profile predicted;
* where the top evidence's first key token landed: per arrangement and residue
  (mod the profile's period), questions answered right of questions there;
* tokens: mean prompt length, tokens added by padding and by repeats, chunks
  the budget dropped; the requests this run made; what the run measured on;
* the verdict (:mod:`phaseaware.compare.verdict`) from the paired tests alone: the
  gain (phase-aware vs naive), the order (order-only vs naive) and phase placement
  (phase-aware vs placebo), and which of the two carried the result.

Nothing here prints; the command prints :meth:`CompareReport.text` or
:meth:`CompareReport.to_dict`.
"""

from __future__ import annotations

import io
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from phaseaware.atomic import atomic_write_bytes
from phaseaware.calibration.stats.paired import PairedOutcomes, paired_mcnemar
from phaseaware.charts import bar_chart
from phaseaware.compare.arrange import CONTROLS, NAIVE, ORDER_ONLY, PHASE_AWARE, PLACEBO
from phaseaware.compare.grade import Grader
from phaseaware.compare.questions import CompareQuestion
from phaseaware.compare.run import CompareRun
from phaseaware.compare.verdict import CompareVerdict, compare_verdict, format_p_value
from phaseaware.errors import InputError, MissingExtraError
from phaseaware.extras import missing_message
from phaseaware.intervals import wilson_interval
from phaseaware.plots import plot_format
from phaseaware.serialize import to_plain

__all__ = ["ArrangementRow", "PairedTest", "CompareReport", "compare_report", "save_plot"]


@dataclass(frozen=True)
class ArrangementRow:
    """One arrangement over every question (fractions 0..1, tokens).

    ``expected_accuracy``: the profile's prediction (mean over questions whose top
    evidence has a key; ``None``: none has). ``evidence_residues[r]``: questions whose
    top evidence's first key token sat at residue ``r``, ``evidence_correct[r]`` of
    them answered right; ``evidence_unplaced``: questions where it had no key or
    was dropped."""

    arrangement: str
    correct: int
    total: int
    accuracy: float
    ci_low: float
    ci_high: float
    mean_prompt_tokens: float
    padding_tokens: int
    repeated_tokens: int
    context_tokens: int
    dropped_chunks: int
    expected_accuracy: float | None
    evidence_residues: tuple[int, ...]
    evidence_correct: tuple[int, ...]
    evidence_unplaced: int

    @property
    def added_tokens_share(self) -> float:
        """Padding and repeated tokens as a fraction of the chunks' own tokens."""
        extra = self.padding_tokens + self.repeated_tokens
        return extra / self.context_tokens if self.context_tokens else 0.0


@dataclass(frozen=True)
class PairedTest:
    """``arrangement`` against ``other`` over the same questions (exact McNemar);
    ``predicted_difference``: the profile's predicted accuracies' difference (a
    fraction; ``None`` when either has no prediction)."""

    arrangement: str
    other: str
    outcome: PairedOutcomes
    predicted_difference: float | None

    @property
    def difference(self) -> float:
        return self.outcome.difference


@dataclass(frozen=True)
class CompareReport:
    """``paired``: phase-aware against every other arrangement; ``order``: order-only
    against naive (``None`` unless both ran); ``measured_on``: the run's identity
    (model, backend, tokenizer, chat format, budget, profile); ``warnings``: how the
    profile's measurement differs from this run."""

    rows: tuple[ArrangementRow, ...]
    paired: tuple[PairedTest, ...]
    order: PairedTest | None
    period: int
    n_questions: int
    n_requests: int
    n_skipped: int
    grader: str
    alpha: float
    verdict: CompareVerdict
    log_path: str
    warnings: tuple[str, ...] = ()
    measured_on: dict[str, Any] | None = None

    def to_dict(self) -> dict[str, Any]:
        """One JSON document (fractions 0..1, tokens); each paired test's counts flat."""
        doc: dict[str, Any] = to_plain(self)
        for row, plain in zip(self.rows, doc["rows"], strict=True):
            plain["added_tokens_share"] = row.added_tokens_share
        doc["paired"] = [_test_dict(t) for t in self.paired]
        doc["order"] = None if self.order is None else _test_dict(self.order)
        doc["verdict"] = self.verdict.to_dict()
        return doc

    def text(self) -> str:
        """The readable report: warnings, table, paired tests, residues, verdict."""
        lines = [f"warning: {w}" for w in self.warnings]
        lines += _table(self)
        lines.append("")
        lines.append(f"paired by question (exact McNemar, alpha {self.alpha:g}):")
        tests = [*self.paired, *([self.order] if self.order is not None else [])]
        lines += [f"  {_paired_line(t, self.alpha)}" for t in tests] or [
            "  none: a paired test needs phase-aware and another arrangement"
        ]
        lines.append("")
        lines += _residue_lines(self)
        for r in self.rows:
            if r.padding_tokens or r.repeated_tokens:
                lines.append(
                    f"tokens added by {r.arrangement}: {r.padding_tokens} padding + "
                    f"{r.repeated_tokens} repeated over {r.total} prompts"
                )
        if self.measured_on:
            lines.append(_measured_on_line(self.measured_on))
        lines.append(
            f"requests: {self.n_requests} made by this run, {self.n_skipped} answers reused "
            f"from {self.log_path}"
        )
        lines += self.verdict.lines()
        return "\n".join(lines)


def _test_dict(test: PairedTest) -> dict[str, Any]:
    o = test.outcome
    return {
        "arrangement": test.arrangement,
        "other": test.other,
        "wins": o.wins,
        "losses": o.losses,
        "both_right": o.both_right,
        "both_wrong": o.both_wrong,
        "p_value": o.p_value,
        "difference": o.difference,
        "predicted_difference": test.predicted_difference,
    }


def _pct(value: float | None) -> str:
    return "-" if value is None else f"{100 * value:.1f}%"


def _table(report: CompareReport) -> list[str]:
    lines = [
        f"{report.n_questions} questions x {len(report.rows)} arrangements, grader "
        f"{report.grader}, 95% Wilson intervals; predicted: the profile's expected accuracy",
        f"  {'arrangement':<20} {'accuracy':>9} {'95% CI':>16} {'predicted':>10} "
        f"{'tokens/prompt':>14} {'added':>7} {'dropped':>8}",
    ]
    for r in report.rows:
        ci = f"{100 * r.ci_low:.1f}-{100 * r.ci_high:.1f}%"
        name = f"{r.arrangement} (control)" if r.arrangement in CONTROLS else r.arrangement
        lines.append(
            f"  {name:<20} {100 * r.accuracy:>8.1f}% {ci:>16} {_pct(r.expected_accuracy):>10} "
            f"{r.mean_prompt_tokens:>14.1f} {100 * r.added_tokens_share:>6.2f}% "
            f"{r.dropped_chunks:>8}"
        )
    return lines


def _paired_line(test: PairedTest, alpha: float) -> str:
    o = test.outcome
    significant = "significant" if o.p_value < alpha else "not significant"
    predicted = (
        ""
        if test.predicted_difference is None
        else f" (the profile predicted {100 * test.predicted_difference:+.1f})"
    )
    return (
        f"{test.arrangement} vs {test.other}: {100 * o.difference:+.1f} points observed"
        f"{predicted}; wins {o.wins}, losses {o.losses}, "
        f"{format_p_value(o.p_value, alpha)}, {significant}"
    )


def _residue_lines(report: CompareReport) -> list[str]:
    lines = [
        "where the top evidence's key landed: answered right / questions, by residue "
        f"mod {report.period}",
        f"  {'residue':<20} " + " ".join(f"{i:>7}" for i in range(report.period)),
    ]
    for r in report.rows:
        cells = " ".join(
            f"{f'{c}/{n}':>7}" for c, n in zip(r.evidence_correct, r.evidence_residues, strict=True)
        )
        tail = f"  (+{r.evidence_unplaced} without a key)" if r.evidence_unplaced else ""
        lines.append(f"  {r.arrangement:<20} {cells}{tail}")
    return lines


def _measured_on_line(on: dict[str, Any]) -> str:
    return (
        f"measured on: model {on.get('model')!r} ({on.get('backend')}), tokenizer "
        f"{on.get('tokenizer_spec')!r}, chat format {on.get('chat_format')!r}, budget "
        f"{on.get('budget_tokens')} tokens; profile {on.get('profile_model')!r}, period "
        f"{on.get('period')}"
    )


def _rows(
    questions: Sequence[CompareQuestion],
    by_key: dict[tuple[str, str], Any],
    arrangements: Sequence[str],
    grades: dict[tuple[str, str], bool],
    period: int,
) -> list[ArrangementRow]:
    rows = []
    for arrangement in arrangements:
        records = [by_key[(q.id, arrangement)] for q in questions]
        right = [grades[(q.id, arrangement)] for q in questions]
        correct = sum(right)
        low, high = wilson_interval(correct, len(records))
        histogram, hits = [0] * period, [0] * period
        unplaced = 0
        for r, ok in zip(records, right, strict=True):
            if r.evidence_residue is None:
                unplaced += 1
            else:
                histogram[r.evidence_residue % period] += 1
                hits[r.evidence_residue % period] += ok
        expected = [r.expected_accuracy for r in records if r.expected_accuracy is not None]
        rows.append(
            ArrangementRow(
                arrangement=arrangement,
                correct=correct,
                total=len(records),
                accuracy=correct / len(records),
                ci_low=low,
                ci_high=high,
                mean_prompt_tokens=sum(r.prompt_tokens for r in records) / len(records),
                padding_tokens=sum(r.padding_tokens for r in records),
                repeated_tokens=sum(r.repeated_tokens for r in records),
                context_tokens=sum(r.context_tokens for r in records),
                dropped_chunks=sum(r.dropped for r in records),
                expected_accuracy=sum(expected) / len(expected) if expected else None,
                evidence_residues=tuple(histogram),
                evidence_correct=tuple(hits),
                evidence_unplaced=unplaced,
            )
        )
    return rows


def _paired_test(
    first: str,
    second: str,
    questions: Sequence[CompareQuestion],
    grades: dict[tuple[str, str], bool],
    rows: Sequence[ArrangementRow],
) -> PairedTest:
    predicted = {r.arrangement: r.expected_accuracy for r in rows}
    a, b = predicted[first], predicted[second]
    outcome = paired_mcnemar(
        [grades[(q.id, first)] for q in questions], [grades[(q.id, second)] for q in questions]
    )
    return PairedTest(first, second, outcome, None if a is None or b is None else a - b)


def _verdict(
    paired: Sequence[PairedTest], order: PairedTest | None, alpha: float
) -> CompareVerdict:
    by_other = {t.other: t.outcome for t in paired}
    return compare_verdict(
        gain=by_other.get(NAIVE),
        order=None if order is None else order.outcome,
        placement=by_other.get(PLACEBO),
        alpha=alpha,
    )


def compare_report(
    run: CompareRun,
    *,
    questions: Sequence[CompareQuestion],
    grader: Grader,
    grader_name: str,
    period: int,
    arrangements: Sequence[str],
    alpha: float = 0.05,
) -> CompareReport:
    """Grade every logged answer with ``grader`` and compute the report."""
    by_key = {r.key: r for r in run.records}
    missing = [(q.id, a) for q in questions for a in arrangements if (q.id, a) not in by_key]
    if missing:
        raise InputError(
            f"{len(missing)} answers are missing from {run.log_path} (first: {missing[0]}); "
            "run the same command again to finish the comparison"
        )
    questions_by_id = {q.id: q for q in questions}
    grades = {
        key: grader(by_key[key].completion, questions_by_id[key[0]].answers)
        for key in ((q.id, a) for q in questions for a in arrangements)
    }
    rows = _rows(questions, by_key, arrangements, grades, period)
    names = [r.arrangement for r in rows]
    paired = [
        _paired_test(PHASE_AWARE, other, questions, grades, rows)
        for other in names
        if PHASE_AWARE in names and other != PHASE_AWARE
    ]
    order = (
        _paired_test(ORDER_ONLY, NAIVE, questions, grades, rows)
        if ORDER_ONLY in names and NAIVE in names
        else None
    )
    return CompareReport(
        rows=tuple(rows),
        paired=tuple(paired),
        order=order,
        period=period,
        n_questions=len(questions),
        n_requests=run.n_requests,
        n_skipped=run.n_skipped,
        grader=grader_name,
        alpha=alpha,
        verdict=_verdict(paired, order, alpha),
        log_path=run.log_path,
        warnings=run.warnings,
        measured_on=run.settings,
    )


def text_chart(report: CompareReport) -> str:
    """Accuracy per arrangement as a text bar chart with intervals."""
    rows = report.rows
    return bar_chart(
        [r.arrangement for r in rows],
        [r.accuracy for r in rows],
        lows=[r.ci_low for r in rows],
        highs=[r.ci_high for r in rows],
    )


def save_plot(report: CompareReport, path: str | Path) -> None:
    """Accuracy per arrangement (95% intervals) and the evidence residue histogram (PNG/SVG...)."""
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        raise MissingExtraError(missing_message("matplotlib", what="--plot")) from None
    rows = report.rows
    fig, (left, right) = plt.subplots(1, 2, figsize=(10, 3.8))
    names = [r.arrangement for r in rows]
    acc = [r.accuracy for r in rows]
    err = [[a - r.ci_low for a, r in zip(acc, rows, strict=True)],
           [r.ci_high - a for a, r in zip(acc, rows, strict=True)]]  # fmt: skip
    left.bar(names, acc, yerr=err, capsize=4, color="#4c72b0")
    left.set_ylim(0, 1.05)
    left.set_ylabel("accuracy")
    left.set_title(f"{report.n_questions} questions")
    width = 0.8 / max(1, len(rows))
    for i, r in enumerate(rows):
        xs = [x + i * width for x in range(report.period)]
        right.bar(xs, r.evidence_residues, width=width, label=r.arrangement)
    right.set_xlabel(f"residue of the top evidence's key (mod {report.period})")
    right.set_ylabel("questions")
    right.legend(fontsize=8)
    fig.tight_layout()
    buffer = io.BytesIO()
    fmt = plot_format(path)
    fig.savefig(buffer, dpi=120, format=fmt)
    plt.close(fig)
    atomic_write_bytes(path, buffer.getvalue())
