"""The end-of-run report of a calibration: JSON summary, text (table, bar chart, verdict), PNG.

Also the ``--plan`` estimate (:func:`plan_summary`, :func:`format_plan`). Nothing
here prints: the CLI prints what these functions return.
"""

from __future__ import annotations

import io
import math
from typing import Any

from phaseaware.atomic import atomic_write_bytes
from phaseaware.calibration.probe_settings import ProbeSettings
from phaseaware.calibration.runner import CalibrationResult
from phaseaware.calibration.stats.plan import plan_calibration
from phaseaware.calibration.stats.window import WindowSweep
from phaseaware.calibration.verdict import (
    Verdict,
    auto_period_test,
    homogeneity_p_value,
    phase_verdict,
)
from phaseaware.charts import bar_chart
from phaseaware.errors import CalibrationError
from phaseaware.extras import missing_message
from phaseaware.plots import plot_format
from phaseaware.profiles.model import Profile

__all__ = [
    "summary_dict",
    "format_report",
    "save_plot",
    "plan_summary",
    "format_plan",
    "run_verdict",
]


def _num(value: float | None) -> float | None:
    return None if value is None or not math.isfinite(value) else float(value)


def _ci_bounds(profile: Profile) -> tuple[list[float], list[float]]:
    """The profile's 95% interval bounds; a calibration run computes one for every residue."""
    lows, highs = [], []
    for r, (lo, hi) in enumerate(zip(profile.ci_low, profile.ci_high, strict=True)):
        if lo is None or hi is None:
            raise CalibrationError(
                f"profile for {profile.model} has no 95% interval for residue {r}; "
                "the report needs a profile from a calibration run: re-run the calibration"
            )
        lows.append(lo)
        highs.append(hi)
    return lows, highs


def run_verdict(result: CalibrationResult) -> Verdict:
    """The verdict of a calibration: its key-residue counts with Cochran's Q (paired over base
    prompts) as the test, and the length sweep's counts when it ran. Under ``--period auto``
    the test is the detection with Cochran's Q at the detected period (both must reject),
    or "no period detected" with nothing tested at the best candidate."""
    analysis = result.analysis
    stats, length = analysis.stats, analysis.length_stats
    detection = analysis.detection
    p_value, test, note = stats.cochran.p_value, "Cochran's Q over base prompts", None
    if detection is not None:
        # the test a detected period is confirmed by (calibration.analysis): the chi-square
        # over every key-sweep probe at that period
        chi_p = homogeneity_p_value(stats.summary.successes, stats.summary.n)
        p_value, test, note = auto_period_test(
            detection, residue_p=chi_p, residue_test="chi-square"
        )
    untested = detection is not None and detection.period is None
    return phase_verdict(
        successes=stats.summary.successes,
        n=stats.summary.n,
        period=analysis.period,
        length_successes=None if length is None or untested else length.summary.successes,
        length_n=None if length is None or untested else length.summary.n,
        alpha=stats.alpha,
        p_value=p_value,
        test=test,
        period_note=note,
        period_detected=None if detection is None else detection.period is not None,
    )


def summary_dict(result: CalibrationResult) -> dict[str, Any]:
    """JSON-safe summary of a ``CalibrationResult`` (fractions 0..1, positions in tokens)."""
    analysis, profile = result.analysis, result.profile
    stats = analysis.stats
    doc: dict[str, Any] = {
        "model": profile.model,
        "period": profile.period,
        "residue_accuracy": list(profile.residue_accuracy),
        "n": list(profile.n),
        "ci_low": [_num(v) for v in profile.ci_low],
        "ci_high": [_num(v) for v in profile.ci_high],
        "reliability": list(profile.reliability or ()),
        "weak_residues": list(stats.weak_residues),
        "cochran_p": _num(stats.cochran.p_value),
        "gap": _num(stats.summary.gap),
        "verdict": stats.verdict,
        "length_verdict": None if analysis.length_stats is None else analysis.length_stats.verdict,
        "length_residue_accuracy": (
            None
            if profile.length_residue_accuracy is None
            else list(profile.length_residue_accuracy.accuracy)
        ),
        "period_detection": profile.extra.get("period_detection"),
        "local_window": profile.local_window,
        **_window_summary(analysis.window),
        "log": str(result.log_path),
        "profile": None if result.out_path is None else str(result.out_path),
        "probes_run": result.n_run,
        "probes_skipped": result.n_skipped,
        "phase_verdict": run_verdict(result).to_dict(),
    }
    return doc


def _window_summary(window: WindowSweep | None) -> dict[str, Any]:
    """The window sweep's part of the summary (all ``None`` when the log holds none)."""
    if window is None:
        return {"local_window_accuracy": None, "window_by_distance": None, "window_note": None}
    effect = window.effect
    return {
        # TODO(lead): phaseaware.serialize.to_plain(effect) once it lands
        "local_window_accuracy": None
        if effect is None
        else {name: getattr(effect, name) for name in effect.__dataclass_fields__},
        "window_by_distance": [
            {
                "distance": row.distance,
                "n": row.n,
                "accuracy": row.accuracy,
                "inside_window": window.inside(row),
            }
            for row in window.by_distance
        ],
        "window_note": window.note,
    }


def _window_lines(window: WindowSweep) -> list[str]:
    """Accuracy by key-to-end distance, then the pooled in-window figure or why there is none."""
    size = "unknown" if window.local_window is None else f"{window.local_window} tokens"
    lines = [f"window sweep (raw local window: {size})"]
    lines.append(f"{'distance':>8}  {'n':>4}  {'accuracy':>8}  {'in window':>9}")
    for row in window.by_distance:
        inside = "yes" if window.inside(row) else "no"
        lines.append(f"{row.distance:>8}  {row.n:>4}  {100 * row.accuracy:>7.1f}%  {inside:>9}")
    effect = window.effect
    if effect is None:
        lines.append(f"local window: {window.note}")
    else:
        lines.append(
            f"local window: {100 * effect.accuracy:.1f}% [{100 * effect.ci_low:.1f}, "
            f"{100 * effect.ci_high:.1f}] (n = {effect.n}, key {effect.min_distance}-"
            f"{effect.max_distance} tokens from the end)"
        )
    return lines


def format_report(result: CalibrationResult) -> str:
    """The readable report: residue table, bar chart, verdicts, window sweep, paths."""
    profile, analysis = result.profile, result.analysis
    lines = [f"model {profile.model}  period {profile.period}  tokenizer {profile.tokenizer.spec}"]
    lines.append(f"{'residue':>7}  {'n':>4}  {'accuracy':>8}  {'95% CI':>15}  {'reliability':>11}")
    reliability = profile.reliability or profile.residue_accuracy
    ci_low, ci_high = _ci_bounds(profile)
    for r in range(profile.period):
        lines.append(
            f"{r:>7}  {profile.n[r]:>4}  {100 * profile.residue_accuracy[r]:>7.1f}%  "
            f"[{100 * ci_low[r]:5.1f}, {100 * ci_high[r]:5.1f}]  "
            f"{100 * reliability[r]:>10.1f}%"
        )
    lines.append("")
    lines.append(
        bar_chart(
            [f"r={r}" for r in range(profile.period)],
            list(profile.residue_accuracy),
            lows=ci_low,
            highs=ci_high,
        )
    )
    detection = profile.extra.get("period_detection")
    if isinstance(detection, dict) and detection:
        found = detection["period"]
        top = max((row["period"] for row in detection.get("candidates") or []), default=None)
        among = f" among 2-{top}" if top else ""
        if found:
            lines.append(
                f"period detection: period {found} (detected{among}, strength "
                f"{detection['strength']:.2f}, Holm-adjusted p = {detection['p_value']:.3g})"
            )
        else:
            lines.append(
                f"period detection: no period detected{among} (best candidate "
                f"{detection['candidate']}, Holm-adjusted p = {detection['p_value']:.3g}"
                + (f"; {detection['note']}" if detection.get("note") else "")
                + "); residues shown at the candidate, untested"
            )
        lines += _power_lines(detection)
    lines.append(f"key residue: {analysis.stats.verdict}")
    if analysis.length_stats is not None:
        lines.append(f"length residue: {analysis.length_stats.verdict}")
    if analysis.window is not None:
        lines += _window_lines(analysis.window)
    lines += run_verdict(result).lines()
    lines.append(f"log: {result.log_path}")
    if result.out_path is not None:
        lines.append(f"profile: {result.out_path}")
    return "\n".join(lines)


def _power_lines(detection: dict[str, Any]) -> list[str]:
    """Each candidate period's adjusted p-value and the power the run had to find it."""
    rows = detection.get("candidates") or []
    if not rows:
        return []
    cells = [
        f"{row['period']}: p {row['p_value']:.2g}, power {100 * row['power']:.0f}%" for row in rows
    ]
    return ["  candidates (Holm-adjusted p, power at the observed effect): " + "; ".join(cells)]


def save_plot(result: CalibrationResult, path: str) -> None:
    """Bar chart of accuracy by residue with 95% intervals (needs matplotlib)."""
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        raise CalibrationError(missing_message("matplotlib", what="--plot")) from None
    profile = result.profile
    residues = list(range(profile.period))
    acc = profile.residue_accuracy
    ci_low, ci_high = _ci_bounds(profile)
    err = [
        [a - lo for a, lo in zip(acc, ci_low, strict=True)],
        [hi - a for a, hi in zip(acc, ci_high, strict=True)],
    ]
    fig, ax = plt.subplots(figsize=(6, 3.5))
    ax.bar(residues, acc, yerr=err, capsize=3, color="#4c72b0")
    ax.set_xlabel(f"key residue (position mod {profile.period})")
    ax.set_ylabel("accuracy")
    ax.set_ylim(0, 1.05)
    ax.set_title(profile.model)
    fig.tight_layout()
    buffer = io.BytesIO()
    fmt = plot_format(path)
    fig.savefig(buffer, dpi=120, format=fmt)
    plt.close(fig)
    try:
        atomic_write_bytes(path, buffer.getvalue())  # readers never see half a chart
    except OSError as exc:
        raise CalibrationError(f"cannot write --plot {path}: {exc}") from None


def plan_summary(
    settings: ProbeSettings,
    *,
    target_half_width: float | None = None,
    detect_gap: float | None = None,
    price_per_million: float | None = None,
    gap_period: int | None = None,
    auto_period: bool = False,
) -> dict[str, Any]:
    """The ``--plan`` estimate: base prompts, probes, tokens, cost (``None`` without a price).

    Without a target (``target_half_width`` or ``detect_gap``) it is the run as
    configured; with one, :func:`~phaseaware.calibration.stats.plan.plan_calibration`
    sizes it. ``gap_period`` (a run that detects its period, ``auto_period``): size it
    so that ``detect_gap`` repeating every ``gap_period`` offsets is found.
    """
    period = settings.n_offsets
    if gap_period is not None and not (auto_period and detect_gap is not None):
        raise CalibrationError(
            "--gap-period sizes a run that detects its period: give it with --period auto "
            "and --detect-gap"
        )
    tokens = settings.context_tokens + settings.max_tokens
    if target_half_width is None and detect_gap is None:
        n_probes = settings.base_prompts * settings.probes_per_base
        cost = None if price_per_million is None else n_probes * tokens * price_per_million / 1e6
        return {
            "n_base_prompts": settings.base_prompts,
            "n_probes": n_probes,
            "total_tokens": n_probes * tokens,
            "estimated_cost": cost,
            "rationale": "as configured (--base-prompts); give --target-half-width or "
            "--detect-gap to size it",
        }
    plan = plan_calibration(
        period=period,
        target_half_width=target_half_width,
        detect_gap=detect_gap,
        tokens_per_probe=tokens,
        price_per_million_tokens=price_per_million,
        sweeps=settings.sweeps,
        gap_period=gap_period,
        max_period=period if auto_period else None,
    )
    return {
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


def format_plan(doc: dict[str, Any]) -> str:
    """:func:`plan_summary`'s estimate as text."""
    lines = [
        f"base prompts: {doc['n_base_prompts']}\nprobes: {doc['n_probes']}\n"
        f"tokens: {doc['total_tokens']:,}"
    ]
    if doc["estimated_cost"] is not None:
        lines.append(f"estimated cost: {doc['estimated_cost']:.2f}")
    lines.append(doc["rationale"])
    return "\n".join(lines)
