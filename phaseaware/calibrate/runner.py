"""Run a calibration durably and turn its log into a profile.

``calibrate`` plans the probes, skips those already in the log (resume), sends
each base prompt's pending variants to the backend as one group, judges every
completion (first number == expected answer), appends it to the log (fsynced
per line) and, at the end, builds the profile from the log and saves it
atomically. Interrupting a run (Ctrl-C, a crash) leaves a usable log; running
the same command again resumes it.

Server-added tokens (``position_offset``): when the server puts
``position_offset`` tokens of its own (typically a BOS) in front of the prompt
phaseaware rendered, the model sees every token ``position_offset`` positions
later, so every residue shifts. The log therefore stores positions *as the
model sees them*: ``key_position`` and ``prompt_tokens`` of each record are
phaseaware's counts plus ``position_offset`` (which the header's settings
record, so a resume with another offset is refused as a different run, and the
profile's ``extra["position_offset"]`` repeats). A profile measured this way
is in the model's absolute positions: apply it to prompts served the same way.

``build_profile_from_log`` is the single place where outcomes become
statistics: key-sweep outcomes by key residue (``key_position mod period``),
length-sweep outcomes by length residue (``prompt_tokens mod period``), both as
paired base-prompt × residue matrices for ``phaseaware.calibrate.stats``, and
window-sweep outcomes by key-to-end distance (``prompt_tokens - key_position``),
those within the model's ``local_window`` (from the backend's ``model_info``)
pooled into the profile's ``local_window_accuracy``
(``phaseaware.calibrate.stats_window``). Each sweep's probes feed only its own
figures.
"""

from __future__ import annotations

import hashlib
import json
import math
import os
import time
from collections.abc import Callable
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import numpy as np

from phaseaware import __version__
from phaseaware.calibrate.backends.base import Backend
from phaseaware.calibrate.log import LogHeader, ProbeRecord, open_log, read_log
from phaseaware.calibrate.probes import ProbeSettings, iter_groups, judge
from phaseaware.calibrate.stats import CalibrationStats, PeriodDetection, calibration_stats
from phaseaware.calibrate.stats_period import detect_period
from phaseaware.calibrate.stats_window import WindowSweep, window_sweep
from phaseaware.errors import CalibrationError
from phaseaware.layouts import PromptLayout
from phaseaware.profile import LengthResidueEffect, Profile, Provenance, TokenizerRef
from phaseaware.tokenizers.base import Tokenizer

__all__ = [
    "CalibrationResult",
    "ProgressFn",
    "run_fingerprint",
    "make_header",
    "calibrate",
    "build_profile_from_log",
    "analyze_log",
    "LogAnalysis",
]

ProgressFn = Callable[[int, int, ProbeRecord | None], None]


def run_fingerprint(settings: dict[str, Any], *, tokenizer_fingerprint: str, model: str) -> str:
    """``sha256:<hex>`` of the canonical settings + tokenizer + model: equal iff same run."""
    doc = {"settings": settings, "tokenizer": tokenizer_fingerprint, "model": model}
    canonical = json.dumps(doc, sort_keys=True, separators=(",", ":"))
    return "sha256:" + hashlib.sha256(canonical.encode("utf-8")).hexdigest()


def make_header(
    *,
    settings: ProbeSettings,
    tokenizer: Tokenizer,
    model: str,
    backend: str,
    template: str,
    period: int | None,
    model_info: dict[str, Any] | None = None,
    position_offset: int = 0,
) -> LogHeader:
    """The log header of a run; ``period=None`` means detect it (offsets = ``n_offsets``).

    ``position_offset``: tokens the server adds before the prompt (see module docstring).
    """
    doc = {
        **settings.to_dict(),
        "period": period if period is not None else "auto",
        "template": template,
        "backend": backend,
        "position_offset": int(position_offset),
    }
    return LogHeader(
        fingerprint=run_fingerprint(
            doc, tokenizer_fingerprint=tokenizer.fingerprint(), model=model
        ),
        settings=doc,
        tokenizer_spec=tokenizer.spec,
        tokenizer_fingerprint=tokenizer.fingerprint(),
        model=model,
        backend=backend,
        created=datetime.now(UTC).isoformat(timespec="seconds"),
        tool_version=__version__,
        model_info=dict(model_info or {}),
    )


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


@dataclass(frozen=True)
class CalibrationResult:
    profile: Profile
    analysis: LogAnalysis
    log_path: Path
    out_path: Path | None
    n_run: int
    n_skipped: int


def calibrate(
    *,
    backend: Backend,
    tokenizer: Tokenizer,
    layout: PromptLayout,
    settings: ProbeSettings,
    model: str,
    template: str,
    log_path: str | os.PathLike[str],
    period: int | None,
    out_path: str | os.PathLike[str] | None = None,
    fresh: bool = False,
    progress: ProgressFn | None = None,
    allow_missing: bool = False,
    position_offset: int | None = None,
) -> CalibrationResult:
    """Run (or resume) a calibration and return its profile (saved to ``out_path`` if given).

    ``period=None`` sweeps offsets ``0..settings.n_offsets-1`` and detects the period.
    ``allow_missing``: probes the backend gives no completion for stay pending
    (batch ingestion) instead of raising ``CalibrationError``.
    ``position_offset``: tokens the server adds before each prompt (BOS); ``None``
    takes the backend's ``prompt_token_offset`` (0 if it has none). Logged
    positions are shifted by it (see module docstring).
    """
    from phaseaware.profile_io import save_profile

    if position_offset is None:
        position_offset = int(getattr(backend, "prompt_token_offset", 0) or 0)
    if position_offset < 0:
        raise CalibrationError(
            f"the prompt token offset must be >= 0 (tokens the server adds, e.g. 1 for a BOS), "
            f"got {position_offset} (--prompt-token-offset)"
        )

    if period is not None and period > settings.n_offsets:
        raise CalibrationError(
            f"period {period} needs at least {period} offsets per sweep, settings have "
            f"{settings.n_offsets}; set n_offsets = period (--period)"
        )
    header = make_header(
        settings=settings,
        tokenizer=tokenizer,
        model=model,
        backend=backend.name,
        template=template,
        period=period,
        model_info=getattr(backend, "model_info", None),
        position_offset=position_offset,
    )
    total = settings.base_prompts * settings.probes_per_base
    n_run = 0
    with open_log(log_path, header, fresh=fresh) as log:
        n_skipped = len(log.done)
        if progress:
            progress(n_skipped, total, None)
        for group in iter_groups(tokenizer=tokenizer, layout=layout, settings=settings):
            pending = [p for p in group.probes if p.probe_id not in log.done]
            if not pending:
                continue
            by_id = {p.probe_id: p for p in pending}
            requests = [p.request(max_tokens=settings.max_tokens) for p in pending]
            last = time.perf_counter()
            for completion in backend.complete(requests):
                probe = by_id.pop(completion.probe_id, None)
                if probe is None:
                    raise CalibrationError(
                        f"backend {backend.name!r} returned an unknown or repeated probe id "
                        f"{completion.probe_id!r}; fix the backend"
                    )
                now = time.perf_counter()
                record = ProbeRecord(
                    probe_id=probe.probe_id,
                    sweep=probe.sweep,
                    base_index=probe.base_index,
                    offset=probe.offset,
                    key_position=probe.key_position + position_offset,
                    prompt_tokens=probe.prompt_tokens + position_offset,
                    correct=judge(probe, completion.text),
                    expected=probe.answer,
                    completion=completion.text,
                    answer_logprob=completion.answer_logprob,
                    elapsed=round(now - last, 6),
                    reported_prompt_tokens=completion.reported_prompt_tokens,
                )
                last = now
                log.append(record)
                n_run += 1
                if progress:
                    progress(len(log.done), total, record)
            if by_id and not allow_missing:
                raise CalibrationError(
                    f"backend {backend.name!r} returned no completion for {sorted(by_id)}; "
                    "re-run the same command to retry them"
                )
    profile = build_profile_from_log(log_path)
    saved = None
    if out_path is not None:
        target = Path(out_path)
        target.parent.mkdir(parents=True, exist_ok=True)
        saved = save_profile(profile, target)
    return CalibrationResult(
        profile=profile,
        analysis=analyze_log(log_path),
        log_path=Path(log_path),
        out_path=saved,
        n_run=n_run,
        n_skipped=n_skipped,
    )


# ---------------------------------------------------------------------- analysis


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
        n_offsets = int(settings["n_offsets"])
        by_offset = _matrix(records, sweep="key", period=n_offsets, column="key_position")
        if by_offset.size == 0:
            raise CalibrationError(f"{log_path} holds no key-sweep probe yet; run the calibration")
        max_period = max(2, n_offsets // 2)
        detection = detect_period(by_offset, max_period=max_period, seed=seed)
        period = detection.period if detection.period is not None else detection.candidate
    period = int(period)
    key = _matrix(records, sweep="key", period=period, column="key_position")
    if key.size == 0 or np.isnan(key).all():
        raise CalibrationError(f"{log_path} holds no key-sweep probe yet; run the calibration")
    stats = calibration_stats(key, seed=seed)
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
    window = window_sweep(
        records,
        local_window=header.model_info.get("local_window"),
        protocol=(
            f"phaseaware calibrate window sweep: target record last, "
            f"{settings['base_prompts']} base prompts x {settings['n_offsets']} offsets, "
            f"{settings['context_tokens']}-{settings['context_tokens'] + settings['n_offsets'] - 1}"
            f"-token prompts, template {settings['template']!r}"
        ),
    )
    return LogAnalysis(header, period, stats, length_stats, detection, len(records), window)


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
        f"{settings['distractors']} distractors, template {settings['template']!r}, "
        f"seed {settings['seed']}; greedy answer judged by its first number"
    )
    extra: dict[str, Any] = {
        "stats": stats.to_dict(),
        "run_fingerprint": header.fingerprint,
        "position_offset": int(settings.get("position_offset", 0)),
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
