"""Turn a calibration log into statistics and a profile.

``build_profile_from_log`` is the single place where outcomes become
statistics: key-sweep outcomes by key residue (``key_position mod period``),
length-sweep outcomes by length residue (``prompt_tokens mod period``), both as
paired base-prompt × residue matrices for ``phaseaware.calibration.stats``, and
window-sweep outcomes by key-to-end distance (``prompt_tokens - key_position``),
those within the model's ``local_window`` (from the backend's ``model_info``)
pooled into the profile's ``local_window_accuracy``
(``phaseaware.calibration.stats.window``). Each sweep's probes feed only its own
figures.
"""

from __future__ import annotations

import math
import os
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

import numpy as np

from phaseaware.calibration.log import LogHeader, ProbeRecord, read_log
from phaseaware.calibration.stats import CalibrationStats, PeriodDetection, calibration_stats
from phaseaware.calibration.stats.period import detect_period_at_positions, unconfirmed
from phaseaware.calibration.stats.window import WindowSweep, window_sweep
from phaseaware.calibration.verdict import homogeneity_p_value
from phaseaware.errors import CalibrationError
from phaseaware.profiles.model import LengthResidueEffect, Profile, Provenance, TokenizerRef
from phaseaware.version import __version__

__all__ = ["LogAnalysis", "analyze_log", "build_profile_from_log"]


@dataclass(frozen=True)
class LogAnalysis:
    """Statistics of a log: the key sweep (``stats``), the length sweep, period detection,
    the window sweep (``None`` when the log holds none)."""

    header: LogHeader
    period: int
    stats: CalibrationStats
    length_stats: CalibrationStats | None
    detection: PeriodDetection | None
    n_records: int
    window: WindowSweep | None = None


def _matrix(records: list[ProbeRecord], *, sweep: str, period: int, column: str) -> np.ndarray:
    """Outcomes (rows: base prompt × block of ``period`` offsets; columns: residue), NaN = none."""
    rows: dict[tuple[int, int], np.ndarray] = {}
    for r in records:
        if r.sweep != sweep:
            continue
        row = rows.setdefault((r.base_index, r.offset // period), np.full(period, np.nan))
        row[getattr(r, column) % period] = 1.0 if r.correct else 0.0
    if not rows:
        return np.empty((0, period))
    return np.array([rows[k] for k in sorted(rows)])


def analyze_log(log_path: str | os.PathLike[str], *, seed: int = 0) -> LogAnalysis:
    """Statistics of the log at ``log_path`` (raises ``CalibrationError`` if it has no key sweep)."""
    header, records = read_log(log_path)
    settings = header.settings
    detection = None
    period = settings.get("period")
    if period == "auto" or period is None:
        detection = _detect(records, int(settings["n_offsets"]), log_path)
        period = detection.period if detection.period is not None else detection.candidate
    period = int(period)
    key = _matrix(records, sweep="key", period=period, column="key_position")
    if key.size == 0 or np.isnan(key).all():
        raise CalibrationError(f"{log_path} holds no key-sweep probe yet; run the calibration")
    stats = calibration_stats(key, seed=seed)
    if detection is not None and detection.period is not None:
        detection, stats = _confirm(detection, stats)
    if detection is not None and detection.period is None:
        # nothing is tested at a best-but-non-significant candidate: its residues are
        # shown (and kept in the profile) but no test claims a weak residue there
        stats = replace(
            stats,
            weak_residues=(),
            verdict=(
                f"not tested: no period detected (best candidate {period}, "
                + (detection.note or f"Holm-adjusted p = {detection.p_value:.2g}")
                + ")"
            ),
        )
    missing = [r for r, n in enumerate(stats.summary.n) if n == 0]
    if missing:
        raise CalibrationError(
            f"{log_path} has no completed probe at residue(s) {missing}; re-run the same "
            "calibrate command to finish the run"
        )
    length = _matrix(records, sweep="length", period=period, column="prompt_tokens")
    length_stats = None
    if length.size and not np.isnan(length).all():
        length_stats = calibration_stats(length, seed=seed)
        if detection is not None and detection.period is None:
            length_stats = replace(
                length_stats, weak_residues=(), verdict="not tested: no period detected"
            )
    window = window_sweep(
        records,
        local_window=header.model_info.get("local_window"),
        protocol=(
            f"phaseaware calibrate window sweep: target record last, "
            f"{settings['base_prompts']} base prompts x {settings['n_offsets']} offsets, "
            f"{settings['context_tokens']}-{settings['context_tokens'] + settings['n_offsets'] - 1}"
            f"-token prompts, {_chat_format(settings)}"
        ),
    )
    return LogAnalysis(header, period, stats, length_stats, detection, len(records), window)


def _confirm(
    detection: PeriodDetection, stats: CalibrationStats
) -> tuple[PeriodDetection, CalibrationStats]:
    """A detected period stands when the chi-square over every key-sweep probe at that period
    (:data:`~phaseaware.calibration.verdict.PEARSON`, the test the detection's own LR test
    approximates) rejects too; else it is withdrawn (:func:`unconfirmed`). Cochran's Q uses
    complete base-prompt rows only (a period that does not divide the offsets swept leaves
    partial rows out): when it alone does not reject, its line says so instead of
    contradicting the verdict."""
    s = stats.summary
    chi_p = homogeneity_p_value(s.successes, s.n)
    if not chi_p < detection.alpha:
        return unconfirmed(detection, test="chi-square", p_value=chi_p), stats
    if stats.cochran.p_value < detection.alpha:
        return detection, stats
    weak = ", ".join(str(r) for r in stats.weak_residues) or "none significant"
    return detection, replace(
        stats,
        verdict=(
            f"chi-square over all {sum(s.n)} probes p = {chi_p:.2g}; weak residues: {weak} "
            f"(Holm-corrected McNemar); Cochran's Q on the {stats.n_complete_rows} complete "
            f"base-prompt rows only = {stats.cochran.q:.1f}, p = {stats.cochran.p_value:.2g}"
        ),
    )


def _detect(records: list[ProbeRecord], n_offsets: int, log_path: Any) -> PeriodDetection:
    """``--period auto``: every candidate ``2..n_offsets`` tested on the key sweep's
    ``key_position mod p`` itself (not on a fold by ``n_offsets``)."""
    key = [r for r in records if r.sweep == "key"]
    if not key:
        raise CalibrationError(f"{log_path} holds no key-sweep probe yet; run the calibration")
    positions = np.array([r.key_position for r in key], dtype=np.int64)
    if np.unique(positions).size <= n_offsets:
        raise CalibrationError(
            f"{log_path}: --period auto needs key positions at more than {n_offsets} places "
            f"(--max-period); the log has {np.unique(positions).size}: run more "
            "--base-prompts, or pass --period N"
        )
    correct = np.array([1.0 if r.correct else 0.0 for r in key])
    return detect_period_at_positions(positions, correct, max_period=n_offsets)


def _chat_format(settings: dict[str, Any]) -> str:
    """The run's chat format, for the profile's protocol text. Logs written before the
    rename store it as ``template`` and keep their words, so the same log builds the
    same profile (and a comparison keyed by that profile is reused)."""
    if "chat_format" in settings:
        return f"chat format {settings['chat_format']!r}"
    return f"template {settings['template']!r}"


def _length_effect(analysis: LogAnalysis, source: str) -> LengthResidueEffect | None:
    stats = analysis.length_stats
    if stats is None:
        return None
    s = stats.summary
    return LengthResidueEffect(
        period=analysis.period,
        accuracy=tuple(None if math.isnan(a) else float(a) for a in s.accuracy),
        kind="measured",
        source=source,
        n=tuple(int(k) if k else None for k in s.n),
        note=stats.verdict,
    )


def build_profile_from_log(log_path: str | os.PathLike[str]) -> Profile:
    """The measured profile of the calibration log at ``log_path`` (see module docstring)."""
    analysis = analyze_log(log_path)
    header, stats = analysis.header, analysis.stats
    s, settings, info = stats.summary, header.settings, header.model_info
    source = f"phaseaware calibrate, backend {header.backend!r} (log {Path(log_path).name})"
    protocol = (
        f"needle-in-a-haystack key sweep: {settings['base_prompts']} base prompts x "
        f"{settings['n_offsets']} key offsets, {settings['context_tokens']}-token prompts, "
        f"{settings['distractors']} distractors, {_chat_format(settings)}, "
        f"seed {settings['seed']}; greedy answer judged by its first number"
    )
    extra: dict[str, Any] = {
        "stats": stats.to_dict(),
        "run_fingerprint": header.fingerprint,
        "position_offset": int(settings.get("position_offset", 0)),
        # the longest prompt measured (tokens): the schema bounds local_window by it
        "context_tokens": int(settings["context_tokens"]) + int(settings["n_offsets"]) - 1,
    }
    if analysis.length_stats is not None:
        extra["length_stats"] = analysis.length_stats.to_dict()
    window = analysis.window
    if window is not None:
        extra["window_sweep"] = {
            "local_window": window.local_window,
            "by_distance": [
                {"distance": row.distance, "n": row.n, "correct": row.correct}
                for row in window.by_distance
            ],
            "note": window.note,
        }
    if analysis.detection is not None:
        d = analysis.detection
        extra["period_detection"] = {
            "period": d.period,
            "candidate": d.candidate,
            "strength": d.strength,
            "p_value": d.p_value,
            "alpha": d.alpha,
            "test": d.test,
            "note": d.note,
            # per candidate: Holm-adjusted p-value, power at the observed effect
            "candidates": [
                {"period": p, "p_value": d.p_values[p], "power": d.power[p]}
                for p in sorted(d.p_values)
            ],
        }
    return Profile(
        model=header.model,
        period=analysis.period,
        residue_accuracy=tuple(float(a) for a in s.accuracy),
        n=tuple(int(k) for k in s.n),
        ci_low=tuple(float(v) for v in s.ci_low),
        ci_high=tuple(float(v) for v in s.ci_high),
        tokenizer=TokenizerRef(
            spec=header.tokenizer_spec, fingerprint=header.tokenizer_fingerprint
        ),
        local_window=info.get("local_window"),
        provenance=Provenance(
            kind="measured",
            source=source,
            protocol=protocol,
            created=header.created,
            tool_version=__version__,
        ),
        compression_stride=info.get("compression_stride"),
        length_residue_accuracy=_length_effect(analysis, source),
        reliability=tuple(float(v) for v in stats.reliability),
        local_window_accuracy=None if window is None else window.effect,
        extra=extra,
    )
