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
from phaseaware.extras import missing_message
from phaseaware.intervals import wilson_interval
from phaseaware.plots import plot_format
from phaseaware.profiles.model import LocalWindowEffect, Profile, Provenance, TokenizerRef
from phaseaware.scoring.errors import EvalLogError
from phaseaware.scoring.score import ScoreResult
from phaseaware.scoring.tally import LengthBucket, PhaseTest, ResidueRow, Tally
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


def _test(test: PhaseTest | None) -> dict[str, Any] | None:
    if test is None:
        return None
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
            "test": d.test,
            "note": d.note,
            "candidates": [
                {"period": p, "p_value": d.p_values[p], "power": d.power[p]}
                for p in sorted(d.p_values)
            ],
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
        f"{t.n} samples scored, {result.n_skipped} skipped; " + _period_text(t),
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
    if test is None:
        lines.append("phase dependence: not tested (no period detected)")
    else:
        lines.append(
            f"phase dependence: {test.test}: X2 = {test.statistic:.1f}, df {test.df}, "
            f"{_p(test.p_value)}"
        )
    for b in t.by_length:
        accs = " ".join(
            "-" if r.accuracy is None else f"{100 * r.accuracy:.0f}" for r in b.residues
        )
        tested = "untested" if b.phase_dependence is None else _p(b.phase_dependence.p_value)
        lines.append(f"length {b.low}-{b.high} tokens (n {b.n}): {accs}  ({tested})")
    if result.n_skipped:
        reasons = dict(result.skip_counts)
        lines.append("skipped: " + ", ".join(f"{k} {v}" for k, v in result.skip_counts))
        if reasons.get("duplicate"):
            lines.append(
                f"{reasons['duplicate']} repeated samples (the same doc_id and prompt in another "
                "samples file of this run) counted once"
            )
    lines.append("")
    lines.extend(t.verdict.lines())
    return "\n".join(lines)


def _period_text(t: Tally) -> str:
    """The period, and how ``--period auto`` found it (or that it found none)."""
    d = t.detection
    if d is None:
        return f"period {t.period}"
    top = max(d.p_values, default=d.candidate)
    if d.period is None:
        return (
            f"no period detected among 2-{top} (best candidate {d.candidate}, Holm-adjusted "
            f"{_p(d.p_value)}{'; ' + d.note if d.note else ''}); residues shown mod "
            f"{t.period}, untested"
        )
    return f"period {t.period} (detected among 2-{top}, Holm-adjusted {_p(d.p_value)})"


def save_plot(result: ScoreResult, path: str | Path) -> None:
    """Accuracy by residue with 95% intervals as a PNG/SVG/PDF chart (needs matplotlib)."""
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        raise MissingExtraError(missing_message("matplotlib", what="--plot")) from None
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


def _window(
    result: ScoreResult, local_window: int | None
) -> tuple[LocalWindowEffect | None, dict[str, str]]:
    """The in-window accuracy the log measured (samples whose key sat within ``local_window``
    tokens of the prompt's end, as calibrate's window sweep pools them), and what is lacking."""
    fix = (
        "calibrate with --sweeps key,window to measure it, or score a log whose needles sit "
        "near the prompt's end with --local-window N"
    )
    if local_window is None:
        return None, {
            "local_window": "an eval log cannot tell the model's raw local window, so the "
            "planner never places a key inside it (a calibrated profile records it); pass "
            "--local-window N (the model's window in tokens) with --profile-out, or calibrate "
            "with --sweeps key,window",
        }
    inside = [s for s in result.located if s.prompt_tokens - s.key_position <= local_window]
    if not inside:
        nearest = min(s.prompt_tokens - s.key_position for s in result.located)
        return None, {
            "local_window_accuracy": f"no scored sample had its key within the "
            f"{local_window}-token window (nearest: {nearest} tokens from the end); the planner "
            f"assumes the best residue's accuracy there; {fix}",
        }
    correct = sum(1 for s in inside if s.correct)
    low, high = wilson_interval(correct, len(inside))
    distances = [s.prompt_tokens - s.key_position for s in inside]
    effect = LocalWindowEffect(
        accuracy=correct / len(inside),
        n=len(inside),
        ci_low=low,
        ci_high=high,
        min_distance=min(distances),
        max_distance=max(distances),
        source=f"phaseaware score of {result.source.name}: samples with the key "
        f"{min(distances)}-{max(distances)} tokens from the end, window {local_window}",
    )
    return effect, {}


def build_profile(result: ScoreResult, *, model: str, local_window: int | None = None) -> Profile:
    """A measured profile of ``model`` from the eval (every residue needs a sample), with its
    provenance: the source log, its format, and the samples scored and skipped.

    ``local_window`` (tokens, the model's raw window): recorded, with the in-window accuracy
    of the samples whose key sat that close to the end when the log holds some. What the eval
    could not measure is named in ``extra["lacks"]`` (:meth:`Profile.gaps`), and assembling
    with the profile says so."""
    t = result.tally
    empty = [r.residue for r in t.residues if r.accuracy is None or r.ci is None]
    if empty:
        raise EvalLogError(
            f"no scored sample at residue(s) {empty} of period {t.period}: a profile needs "
            "every residue; score a larger log or pass a smaller --period"
        )
    longest = max(s.prompt_tokens for s in result.located)
    if local_window is not None and local_window > longest:
        raise EvalLogError(
            f"--local-window {local_window} is longer than the longest prompt scored "
            f"({longest} tokens); pass the model's window, at most {longest}"
        )
    window_effect, lacks = _window(result, local_window)
    source = f"phaseaware score of {result.source.name} ({result.format})"
    test = t.phase_dependence
    tested = "no period detected (untested)" if test is None else f"{test.test} {_p(test.p_value)}"
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
        local_window=local_window,
        local_window_accuracy=window_effect,
        provenance=Provenance(
            kind="measured",
            source=source,
            protocol=(
                f"eval log {result.source.name}: {t.n} samples scored ({result.n_skipped} "
                f"skipped), key = the needle's first token, residue = position mod {t.period}; "
                f"{tested}"
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
            "context_tokens": longest,
            **({"lacks": lacks} if lacks else {}),
        },
    )
