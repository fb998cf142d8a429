"""What a comparison found: accuracy per arrangement, paired tests, where evidence landed.

* accuracy per arrangement, with 95% Wilson intervals;
* phase-aware against every other arrangement, paired by question: wins (right
  only with phase-aware), losses (right only with the other), and the exact
  McNemar p-value (two-sided binomial test of wins against losses, ``scipy``);
* where the top evidence's first key token landed: a histogram of its residue
  (mod the profile's period) per arrangement;
* tokens: mean prompt length, tokens added by padding and by repeats, chunks
  the budget dropped; the requests this run made;
* the verdict (:mod:`phaseaware.calibration.verdict`) from the answers in
  retrieval order, counted by the evidence's residue: is this model
  phase-sensitive on these questions.

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
from phaseaware.calibration.stats.dist import binom_two_sided_half
from phaseaware.calibration.verdict import Verdict, phase_verdict
from phaseaware.charts import bar_chart
from phaseaware.compare.arrange import PHASE_AWARE
from phaseaware.compare.grade import Grader
from phaseaware.compare.questions import CompareQuestion
from phaseaware.compare.run import CompareRun
from phaseaware.errors import InputError, MissingExtraError
from phaseaware.intervals import wilson_interval
from phaseaware.plots import plot_format
from phaseaware.serialize import to_plain

__all__ = ["ArrangementRow", "PairedTest", "CompareReport", "compare_report", "save_plot"]


@dataclass(frozen=True)
class ArrangementRow:
    """One arrangement over every question (fractions 0..1, tokens).

    ``evidence_residues[r]``: questions whose top evidence's first key token sat at
    residue ``r``; ``evidence_unplaced``: questions where it had no key or was dropped."""

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
    evidence_unplaced: int

    @property
    def added_tokens_share(self) -> float:
        """Padding and repeated tokens as a fraction of the chunks' own tokens."""
        extra = self.padding_tokens + self.repeated_tokens
        return extra / self.context_tokens if self.context_tokens else 0.0


@dataclass(frozen=True)
class PairedTest:
    """Phase-aware against ``other`` over the same questions (exact McNemar)."""

    other: str
    wins: int
    losses: int
    both_right: int
    both_wrong: int
    p_value: float

    @property
    def difference(self) -> float:
        n = self.wins + self.losses + self.both_right + self.both_wrong
        return (self.wins - self.losses) / n if n else 0.0


@dataclass(frozen=True)
class CompareReport:
    rows: tuple[ArrangementRow, ...]
    paired: tuple[PairedTest, ...]
    period: int
    n_questions: int
    n_requests: int
    n_skipped: int
    grader: str
    alpha: float
    verdict: Verdict | None
    verdict_note: str
    log_path: str

    def to_dict(self) -> dict[str, Any]:
        """One JSON document (fractions 0..1, tokens)."""
        doc: dict[str, Any] = to_plain(self)
        for row, plain in zip(self.rows, doc["rows"], strict=True):
            plain["added_tokens_share"] = row.added_tokens_share
        for test, plain in zip(self.paired, doc["paired"], strict=True):
            plain["difference"] = test.difference
        doc["verdict"] = None if self.verdict is None else self.verdict.to_dict()
        return doc

    def text(self) -> str:
        """The readable report: table, paired tests, residue histogram, verdict."""
        lines = [
            f"{self.n_questions} questions x {len(self.rows)} arrangements, grader "
            f"{self.grader}, 95% Wilson intervals",
            f"  {'arrangement':<20} {'accuracy':>9} {'95% CI':>16} {'tokens/prompt':>14} "
            f"{'added':>7} {'dropped':>8}",
        ]
        for r in self.rows:
            ci = f"{100 * r.ci_low:.1f}-{100 * r.ci_high:.1f}%"
            lines.append(
                f"  {r.arrangement:<20} {100 * r.accuracy:>8.1f}% {ci:>16} "
                f"{r.mean_prompt_tokens:>14.1f} {100 * r.added_tokens_share:>6.2f}% "
                f"{r.dropped_chunks:>8}"
            )
        lines.append("")
        for t in self.paired:
            p = "p < 0.001" if t.p_value < 0.001 else f"p = {t.p_value:.3g}"
            verdict = "significant" if t.p_value < self.alpha else "not significant"
            lines.append(
                f"{PHASE_AWARE} vs {t.other}: {100 * t.difference:+.1f} points; wins {t.wins}, "
                f"losses {t.losses} (exact McNemar {p}, {verdict} at alpha {self.alpha:g})"
            )
        lines.append("")
        lines.append(
            f"where the top evidence's key landed (questions per residue mod {self.period}):"
        )
        lines.append(f"  {'residue':<20} " + " ".join(f"{i:>4}" for i in range(self.period)))
        for r in self.rows:
            counts = " ".join(f"{c:>4}" for c in r.evidence_residues)
            tail = f"  (+{r.evidence_unplaced} without a key)" if r.evidence_unplaced else ""
            lines.append(f"  {r.arrangement:<20} {counts}{tail}")
        for r in self.rows:
            if r.padding_tokens or r.repeated_tokens:
                lines.append(
                    f"tokens added by {r.arrangement}: {r.padding_tokens} padding + "
                    f"{r.repeated_tokens} repeated over {r.total} prompts"
                )
        lines.append(
            f"requests: {self.n_requests} made by this run, {self.n_skipped} answers reused "
            f"from {self.log_path}"
        )
        lines += self.verdict.lines() if self.verdict is not None else [self.verdict_note]
        return "\n".join(lines)


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
        correct = sum(grades[(q.id, arrangement)] for q in questions)
        low, high = wilson_interval(correct, len(records))
        histogram = [0] * period
        unplaced = 0
        for r in records:
            if r.evidence_residue is None:
                unplaced += 1
            else:
                histogram[r.evidence_residue % period] += 1
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
                evidence_unplaced=unplaced,
            )
        )
    return rows


def _paired(
    questions: Sequence[CompareQuestion],
    grades: dict[tuple[str, str], bool],
    arrangements: Sequence[str],
) -> list[PairedTest]:
    if PHASE_AWARE not in arrangements:
        return []
    tests = []
    for other in arrangements:
        if other == PHASE_AWARE:
            continue
        pairs = [(grades[(q.id, PHASE_AWARE)], grades[(q.id, other)]) for q in questions]
        wins = sum(a and not b for a, b in pairs)
        losses = sum(b and not a for a, b in pairs)
        tests.append(
            PairedTest(
                other=other,
                wins=wins,
                losses=losses,
                both_right=sum(a and b for a, b in pairs),
                both_wrong=sum(not a and not b for a, b in pairs),
                p_value=binom_two_sided_half(wins, wins + losses),
            )
        )
    return tests


def _verdict(
    questions: Sequence[CompareQuestion],
    by_key: dict[tuple[str, str], Any],
    grades: dict[tuple[str, str], bool],
    arrangements: Sequence[str],
    period: int,
    alpha: float,
) -> tuple[Verdict | None, str]:
    """The verdict from the arrangement in retrieval order (no padding), by evidence residue."""
    plain = next((a for a in arrangements if a != PHASE_AWARE), None)
    if plain is None:
        return None, "verdict: needs an arrangement without padding (naive) to judge"
    successes, n = [0] * period, [0] * period
    for q in questions:
        residue = by_key[(q.id, plain)].evidence_residue
        if residue is not None:
            n[residue % period] += 1
            successes[residue % period] += grades[(q.id, plain)]
    if sum(k > 0 for k in n) < 2:
        return None, (
            f"verdict: the {plain} arrangement put the top evidence on fewer than two residues; "
            "not enough spread to judge phase sensitivity from these questions"
        )
    return phase_verdict(successes=successes, n=n, period=period, alpha=alpha), ""


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
    verdict, note = _verdict(questions, by_key, grades, arrangements, period, alpha)
    return CompareReport(
        rows=tuple(_rows(questions, by_key, arrangements, grades, period)),
        paired=tuple(_paired(questions, grades, arrangements)),
        period=period,
        n_questions=len(questions),
        n_requests=run.n_requests,
        n_skipped=run.n_skipped,
        grader=grader_name,
        alpha=alpha,
        verdict=verdict,
        verdict_note=note,
        log_path=run.log_path,
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
        raise MissingExtraError("--plot needs matplotlib: pip install 'phaseaware[plot]'") from None
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
