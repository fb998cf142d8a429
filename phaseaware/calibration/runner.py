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

Statistics and the profile come from the log alone
(:mod:`phaseaware.calibration.analysis`).
"""

from __future__ import annotations

import hashlib
import json
import os
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from phaseaware.assembly.inputs.options import check_position_offset
from phaseaware.atomic import refuse_same_file
from phaseaware.calibration.analysis import LogAnalysis, analyze_log, build_profile_from_log
from phaseaware.calibration.backends.base import Backend
from phaseaware.calibration.log import LogHeader, ProbeRecord, open_log
from phaseaware.calibration.probes import ProbeSettings, iter_groups, judge
from phaseaware.chat.layout import PromptLayout
from phaseaware.errors import CalibrationError
from phaseaware.profiles.io import save_profile
from phaseaware.profiles.model import Profile
from phaseaware.tokenizers.base import Tokenizer
from phaseaware.version import __version__

__all__ = [
    "CalibrationRun",
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

# Settings keys hashed under their former name (old logs are data: they keep resuming).
_LOGGED_AS = {"chat_format": "template"}


def run_fingerprint(settings: dict[str, Any], *, tokenizer_fingerprint: str, model: str) -> str:
    """``sha256:<hex>`` of the canonical settings + tokenizer + model: equal iff same run.

    The chat format is hashed under ``template``, the settings key that logs written
    before the ``chat_format`` rename store: such a log is the same run, and resumes.
    """
    settings = {_LOGGED_AS.get(key, key): value for key, value in settings.items()}
    doc = {"settings": settings, "tokenizer": tokenizer_fingerprint, "model": model}
    canonical = json.dumps(doc, sort_keys=True, separators=(",", ":"))
    return "sha256:" + hashlib.sha256(canonical.encode("utf-8")).hexdigest()


def make_header(
    *,
    settings: ProbeSettings,
    tokenizer: Tokenizer,
    model: str,
    backend: str,
    chat_format: str,
    period: int | None,
    model_info: Mapping[str, Any] | None = None,
    position_offset: int = 0,
) -> LogHeader:
    """The log header of a run; ``period=None`` means detect it (offsets = ``n_offsets``).

    ``position_offset``: tokens the server adds before the prompt (see module docstring).
    """
    doc = {
        **settings.to_dict(),
        "period": period if period is not None else "auto",
        "chat_format": chat_format,
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
class CalibrationRun:
    """What one calibration run is, apart from its backend: the arguments of
    :func:`calibrate` that identify the run and its log (``position_offset``: see the
    module docstring)."""

    tokenizer: Tokenizer
    layout: PromptLayout
    settings: ProbeSettings
    model: str
    chat_format: str
    log_path: Path
    period: int | None
    fresh: bool = False
    position_offset: int = 0

    def header(self, *, backend: str, model_info: Mapping[str, Any] | None = None) -> LogHeader:
        """The log header this run writes with ``backend``."""
        return make_header(
            settings=self.settings,
            tokenizer=self.tokenizer,
            model=self.model,
            backend=backend,
            chat_format=self.chat_format,
            period=self.period,
            model_info=model_info,
            position_offset=self.position_offset,
        )

    def run(
        self,
        backend: Backend,
        *,
        out_path: str | os.PathLike[str] | None = None,
        progress: ProgressFn | None = None,
        allow_missing: bool = False,
    ) -> CalibrationResult:
        """:func:`calibrate` this run with ``backend``."""
        return calibrate(
            backend=backend,
            tokenizer=self.tokenizer,
            layout=self.layout,
            settings=self.settings,
            model=self.model,
            chat_format=self.chat_format,
            log_path=self.log_path,
            period=self.period,
            out_path=out_path,
            fresh=self.fresh,
            progress=progress,
            allow_missing=allow_missing,
            position_offset=self.position_offset,
        )


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
    chat_format: str,
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
    if out_path is not None:  # before any probe runs: the profile must not replace the log
        refuse_same_file(out_path, {"the calibration log": log_path}, output_name="the profile")
    window = (getattr(backend, "model_info", None) or {}).get("local_window")
    longest = settings.context_tokens + settings.n_offsets - 1
    if isinstance(window, int) and window > longest:  # the profile would be refused at the end
        raise CalibrationError(
            f"the model's local window ({window} tokens) is longer than the longest prompt "
            f"({longest} tokens): every key would sit in the window; raise --context-tokens"
        )
    if position_offset is None:
        position_offset = int(getattr(backend, "prompt_token_offset", 0) or 0)
    position_offset = check_position_offset(
        position_offset, name="--prompt-token-offset", error=CalibrationError
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
        chat_format=chat_format,
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
