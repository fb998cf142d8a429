"""The end-of-run report of ``phaseaware calibrate``: table, bar chart, verdict, JSON, PNG."""

from __future__ import annotations

import json
import math
from typing import Any

from phaseaware.errors import CalibrationError

__all__ = ["summary_dict", "print_report", "save_plot"]


def _num(value: float | None) -> float | None:
    return None if value is None or not math.isfinite(value) else float(value)


def summary_dict(result: Any) -> dict[str, Any]:
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
    }
    return doc


def _window_summary(window: Any) -> dict[str, Any]:
    """The window sweep's part of the summary (all ``None`` when the log holds none)."""
    if window is None:
        return {"local_window_accuracy": None, "window_by_distance": None, "window_note": None}
    effect = window.effect
    return {
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


def _print_window(window: Any) -> None:
    """Accuracy by key-to-end distance, then the pooled in-window figure or why there is none."""
    size = "unknown" if window.local_window is None else f"{window.local_window} tokens"
    print(f"window sweep (raw local window: {size})")
    print(f"{'distance':>8}  {'n':>4}  {'accuracy':>8}  {'in window':>9}")
    for row in window.by_distance:
        inside = "yes" if window.inside(row) else "no"
        print(f"{row.distance:>8}  {row.n:>4}  {100 * row.accuracy:>7.1f}%  {inside:>9}")
    effect = window.effect
    if effect is None:
        print(f"local window: {window.note}")
    else:
        print(
            f"local window: {100 * effect.accuracy:.1f}% [{100 * effect.ci_low:.1f}, "
            f"{100 * effect.ci_high:.1f}] (n = {effect.n}, key {effect.min_distance}-"
            f"{effect.max_distance} tokens from the end)"
        )


def print_report(result: Any, *, as_json: bool = False, plot: str | None = None) -> None:
    from phaseaware.charts import bar_chart

    profile, analysis = result.profile, result.analysis
    if plot:
        save_plot(result, plot)
    if as_json:
        print(json.dumps(summary_dict(result), indent=2))
        return
    print(f"model {profile.model}  period {profile.period}  tokenizer {profile.tokenizer.spec}")
    print(f"{'residue':>7}  {'n':>4}  {'accuracy':>8}  {'95% CI':>15}  {'reliability':>11}")
    reliability = profile.reliability or profile.residue_accuracy
    for r in range(profile.period):
        print(
            f"{r:>7}  {profile.n[r]:>4}  {100 * profile.residue_accuracy[r]:>7.1f}%  "
            f"[{100 * profile.ci_low[r]:5.1f}, {100 * profile.ci_high[r]:5.1f}]  "
            f"{100 * reliability[r]:>10.1f}%"
        )
    print()
    print(
        bar_chart(
            [f"r={r}" for r in range(profile.period)],
            list(profile.residue_accuracy),
            lows=list(profile.ci_low),
            highs=list(profile.ci_high),
        )
    )
    detection = profile.extra.get("period_detection")
    if detection:
        found = detection["period"]
        print(
            f"period detection: {'period ' + str(found) if found else 'no significant period'} "
            f"(candidate {detection['candidate']}, strength {detection['strength']:.2f}, "
            f"p = {detection['p_value']:.3g})"
        )
    print(f"key residue: {analysis.stats.verdict}")
    if analysis.length_stats is not None:
        print(f"length residue: {analysis.length_stats.verdict}")
    if analysis.window is not None:
        _print_window(analysis.window)
    print(f"log: {result.log_path}")
    if result.out_path is not None:
        print(f"profile: {result.out_path}")


def save_plot(result: Any, path: str) -> None:
    """Bar chart of accuracy by residue with 95% intervals (needs matplotlib)."""
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        raise CalibrationError("--plot needs matplotlib: pip install 'phaseaware[plot]'") from None
    profile = result.profile
    residues = list(range(profile.period))
    acc = profile.residue_accuracy
    err = [
        [a - lo for a, lo in zip(acc, profile.ci_low, strict=True)],
        [hi - a for a, hi in zip(acc, profile.ci_high, strict=True)],
    ]
    fig, ax = plt.subplots(figsize=(6, 3.5))
    ax.bar(residues, acc, yerr=err, capsize=3, color="#4c72b0")
    ax.set_xlabel(f"key residue (position mod {profile.period})")
    ax.set_ylabel("accuracy")
    ax.set_ylim(0, 1.05)
    ax.set_title(profile.model)
    fig.tight_layout()
    fig.savefig(path, dpi=120)
    plt.close(fig)
