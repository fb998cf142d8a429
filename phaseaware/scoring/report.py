"""``phaseaware score``'s outputs: the JSON document, the text report, the chart, the profile.

Nothing here prints; the CLI prints what these functions return. Fractions are
0..1 in JSON and the profile, percentages in text.
"""

from __future__ import annotations

import io
from datetime import date
from pathlib import Path
from typing import Any

from phaseaware.atomic import atomic_write_bytes
from phaseaware.charts import bar_chart
from phaseaware.errors import MissingExtraError
from phaseaware.plots import plot_format
from phaseaware.profiles.model import Profile, Provenance, TokenizerRef
from phaseaware.scoring.errors import EvalLogError
from phaseaware.scoring.score import ScoreResult
from phaseaware.scoring.tally import LengthBucket, PhaseTest, ResidueRow
from phaseaware.version import __version__

__all__ = ["to_json", "format_report", "save_plot", "build_profile"]


def _rows(rows: tuple[ResidueRow, ...]) -> list[dict[str, Any]]:
    return [
        {
            "residue": r.residue,
            "n": r.n,
            "correct": r.correct,
            "accuracy": r.accuracy,
            "ci": None if r.ci is None else list(r.ci),
        }
        for r in rows
    ]


def _test(test: PhaseTest) -> dict[str, Any]:
    return {"test": test.test, "statistic": test.statistic, "df": test.df, "p_value": test.p_value}


def _bucket(bucket: LengthBucket) -> dict[str, Any]:
    return {
        "min_tokens": bucket.low,
        "max_tokens": bucket.high,
        "n": bucket.n,
        "residues": _rows(bucket.residues),
        "phase_dependence": _test(bucket.phase_dependence),
    }


def to_json(result: ScoreResult) -> dict[str, Any]:
    """The ``--json`` document: ``period``, ``residues``, ``phase_dependence``, ``by_length``,
    ``skipped`` (the first few, each ``{id, reason, detail}``), ``skip_counts`` (every skip
    by reason), plus counts and provenance."""
    t = result.tally
    d = t.detection
    return {
        "source": str(result.source),
        "format": result.format,
        "tokenizer": result.tokenizer_spec,
        "period": t.period,
        "period_detection": None
        if d is None
        else {
            "period": d.period,
            "candidate": d.candidate,
            "strength": d.strength,
            "p_value": d.p_value,
        },
        "n_scored": t.n,
        "n_skipped": result.n_skipped,
        "skip_counts": dict(result.skip_counts),
        "residues": _rows(t.residues),
        "phase_dependence": _test(t.phase_dependence),
        "by_length": [_bucket(b) for b in t.by_length],
        "verdict": t.verdict.to_dict(),
        "skipped": [
            {"id": s.sample_id, "reason": s.reason, "detail": s.detail} for s in result.skipped
        ],
    }


def _p(p: float) -> str:
    return "p < 0.001" if p < 0.001 else f"p = {p:.3g}"


def format_report(result: ScoreResult) -> str:
    """The readable report: residue table, bar chart, the test, length buckets, skips."""
    t = result.tally
    lines = [
        f"{result.source}  ({result.format}, tokenizer {result.tokenizer_spec})",
        f"{t.n} samples scored, {result.n_skipped} skipped; period {t.period}"
        + (
            ""
            if t.detection is None
            else f" ({'detected' if t.detection.period else 'not significant; best candidate'}, "
            f"{_p(t.detection.p_value)})"
        ),
        f"{'residue':>7}  {'n':>5}  {'correct':>7}  {'accuracy':>8}  {'95% CI':>15}",
    ]
    for r in t.residues:
        if r.accuracy is None or r.ci is None:
            lines.append(f"{r.residue:>7}  {r.n:>5}  {r.correct:>7}  {'-':>8}")
            continue
        lines.append(
            f"{r.residue:>7}  {r.n:>5}  {r.correct:>7}  {100 * r.accuracy:>7.1f}%  "
            f"[{100 * r.ci[0]:5.1f}, {100 * r.ci[1]:5.1f}]"
        )
    lines.append("")
    lines.append(
        bar_chart(
            [f"r={r.residue}" for r in t.residues],
            [r.accuracy for r in t.residues],
            lows=[None if r.ci is None else r.ci[0] for r in t.residues],
            highs=[None if r.ci is None else r.ci[1] for r in t.residues],
        )
    )
    test = t.phase_dependence
    lines.append(
        f"phase dependence: {test.test}: X2 = {test.statistic:.1f}, df {test.df}, "
        f"{_p(test.p_value)}"
    )
    for b in t.by_length:
        accs = " ".join(
            "-" if r.accuracy is None else f"{100 * r.accuracy:.0f}" for r in b.residues
        )
        lines.append(
            f"length {b.low}-{b.high} tokens (n {b.n}): {accs}  ({_p(b.phase_dependence.p_value)})"
        )
    if result.n_skipped:
        lines.append("skipped: " + ", ".join(f"{k} {v}" for k, v in result.skip_counts))
    lines.append("")
    lines.extend(t.verdict.lines())
    return "\n".join(lines)


def save_plot(result: ScoreResult, path: str | Path) -> None:
    """Accuracy by residue with 95% intervals as a PNG/SVG/PDF chart (needs matplotlib)."""
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        raise MissingExtraError("--plot needs matplotlib: pip install 'phaseaware[plot]'") from None
    rows = [r for r in result.tally.residues if r.accuracy is not None and r.ci is not None]
    acc = [float(r.accuracy or 0.0) for r in rows]
    err = [
        [a - r.ci[0] for a, r in zip(acc, rows, strict=True) if r.ci],
        [r.ci[1] - a for a, r in zip(acc, rows, strict=True) if r.ci],
    ]
    fig, ax = plt.subplots(figsize=(6, 3.5))
    ax.bar([r.residue for r in rows], acc, yerr=err, capsize=3, color="#4c72b0")
    ax.set_xlabel(f"key residue (position mod {result.tally.period})")
    ax.set_ylabel("accuracy")
    ax.set_ylim(0, 1.05)
    ax.set_title(result.source.name)
    fig.tight_layout()
    buffer = io.BytesIO()
    fmt = plot_format(path)
    fig.savefig(buffer, dpi=120, format=fmt)
    plt.close(fig)
    try:
        atomic_write_bytes(path, buffer.getvalue())
    except OSError as exc:
        raise EvalLogError(f"cannot write --plot {path}: {exc.strerror or exc}") from None


def build_profile(result: ScoreResult, *, model: str) -> Profile:
    """A measured profile of ``model`` from the eval (every residue needs a sample), with its
    provenance: the source log, its format, and the samples scored and skipped."""
    t = result.tally
    empty = [r.residue for r in t.residues if r.accuracy is None or r.ci is None]
    if empty:
        raise EvalLogError(
            f"no scored sample at residue(s) {empty} of period {t.period}: a profile needs "
            "every residue; score a larger log or pass a smaller --period"
        )
    source = f"phaseaware score of {result.source.name} ({result.format})"
    test = t.phase_dependence
    return Profile(
        model=model,
        period=t.period,
        residue_accuracy=tuple(float(r.accuracy or 0.0) for r in t.residues),
        n=tuple(r.n for r in t.residues),
        ci_low=tuple(r.ci[0] if r.ci else None for r in t.residues),
        ci_high=tuple(r.ci[1] if r.ci else None for r in t.residues),
        tokenizer=TokenizerRef(
            spec=result.tokenizer_spec, fingerprint=result.tokenizer_fingerprint
        ),
        local_window=None,
        provenance=Provenance(
            kind="measured",
            source=source,
            protocol=(
                f"eval log {result.source.name}: {t.n} samples scored ({result.n_skipped} "
                f"skipped), key = the needle's first token, residue = position mod {t.period}; "
                f"{test.test} {_p(test.p_value)}"
            ),
            created=date.today().isoformat(),
            tool_version=__version__,
        ),
        extra={
            "score": {
                "source_log": str(result.source),
                "format": result.format,
                "samples": t.n,
                "skipped": result.n_skipped,
                "phase_dependence": _test(test),
            },
            "context_tokens": max(s.prompt_tokens for s in result.located),
        },
    )
